from django.urls import path

from . import views

app_name = "datasets"
urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("<int:pk>/", views.dataset_detail, name="detail"),
]
