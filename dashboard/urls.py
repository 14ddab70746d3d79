from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import path, reverse_lazy
from django.views.generic import RedirectView

from dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.index, name="index"),
    path("live/", views.live, name="live"),
    path("executions/<uuid:execution_id>/", views.execution, name="execution"),
    path("executions/<uuid:execution_id>/cancel/", views.cancel, name="cancel"),
    # Browsers ask for /favicon.ico whatever the page says.
    path("favicon.ico", RedirectView.as_view(url=static("dashboard/favicon.svg"), permanent=True)),
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
