from django.urls import path

from . import views

app_name = "judgers"
urlpatterns = [
    path("", views.judger_list, name="list"),
    path("<int:pk>/", views.judger_detail, name="detail"),
]
