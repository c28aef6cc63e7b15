from django.urls import path

from . import views

app_name = "review"
urlpatterns = [
    path("runs/<int:run_id>/samples/", views.sample_list, name="samples"),
    path("runs/<int:run_id>/samples/<int:sample_id>/", views.sample_detail, name="sample"),
    path("runs/<int:run_id>/samples/<int:sample_id>/response.txt", views.sample_response, name="sample_response"),
    path("runs/<int:run_id>/samples/<int:sample_id>/flag/", views.flag_create, name="flag_create"),
    path("runs/<int:run_id>/groups/<str:group_id>/", views.group_detail, name="group"),
    path("runs/<int:run_id>/prompts/<int:prompt_index>/", views.prompt_history, name="prompt"),
    path("runs/<int:run_id>/flags/", views.flag_list, name="flags"),
    path("runs/<int:run_id>/flags/<int:flag_id>/delete/", views.flag_delete, name="flag_delete"),
    path("runs/<int:run_id>/export.jsonl", views.export, name="export"),
    path("runs/<int:run_id>/rejudge/", views.rejudge_list, name="rejudge_list"),
    path("rejudge/<int:job_id>/", views.rejudge_detail, name="rejudge"),
    path("rejudge/<int:job_id>/progress/", views.rejudge_progress, name="rejudge_progress"),
    path("rejudge/<int:job_id>/cancel/", views.rejudge_cancel, name="rejudge_cancel"),
    path("rejudge/<int:job_id>/resume/", views.rejudge_resume, name="rejudge_resume"),
]
