from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.index, name="index"),
    path("live/", views.live, name="live"),
    path("executions/<uuid:execution_id>/cancel/", views.cancel, name="cancel"),
    path("teams/<int:team_id>/pause/", views.pause, name="pause"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="dashboard/login.html",
            redirect_authenticated_user=True,
            next_page=reverse_lazy("dashboard:index"),
        ),
        name="login",
    ),
    path(
        "logout/",
        auth_views.LogoutView.as_view(next_page=reverse_lazy("dashboard:login")),
        name="logout",
    ),
]
