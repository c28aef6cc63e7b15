from django.urls import path

from . import views

app_name = "datasets"
urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("new/", views.dataset_new, name="new"),
    path("new/upload/", views.dataset_upload, name="upload"),
    path("new/hf/", views.dataset_hf, name="hf"),
    path("new/arith/", views.dataset_arith, name="arith"),
    path("<int:pk>/", views.dataset_detail, name="detail"),
    path("<int:pk>/progress/", views.dataset_progress, name="progress"),
    path("<int:pk>/delete/", views.dataset_delete, name="delete"),
    path("<int:pk>/export.jsonl", views.dataset_export, name="export"),
]
