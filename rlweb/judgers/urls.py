from django.urls import path

from . import views

app_name = "judgers"
urlpatterns = [
    path("", views.judger_list, name="list"),
    path("new/", views.judger_new, name="new"),
    path("new/<str:kind>/", views.judger_create, name="create"),
    path("<int:pk>/", views.judger_detail, name="detail"),
    path("<int:pk>/edit/", views.judger_edit, name="edit"),
    path("<int:pk>/try/", views.judger_try, name="try"),
    path("<int:pk>/dry-run/", views.judger_dry_run, name="dry_run"),
    path("<int:pk>/delete/", views.judger_delete, name="delete"),
]
