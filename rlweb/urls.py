from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from rlweb.core import views as core_views

urlpatterns = [
    path("", core_views.home, name="home"),
    path("healthz", core_views.healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/", include("rlweb.core.urls")),
    path("runs/", include("rlweb.runs.urls")),
    path("datasets/", include("rlweb.datasets.urls")),
    path("judgers/", include("rlweb.judgers.urls")),
    path("review/", include("rlweb.review.urls")),
    path("api/", include("rlweb.api.urls")),
    path("admin/", admin.site.urls),
]
