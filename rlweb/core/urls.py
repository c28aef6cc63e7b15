from django.urls import include, path

from . import views

app_name = "accounts"
urlpatterns = [
    path("me/", views.profile, name="profile"),
    path("me/token/", include("rlweb.api.web_urls")),  # the API token buttons of the profile page
]
