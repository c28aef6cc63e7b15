"""API tokens: issued, shown once and revoked from the profile page, rotated over the API, and
managed in Django admin."""

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_the_profile_page_issues_a_token_shows_it_once_and_it_works(alice_client, alice):
    page = alice_client.get("/accounts/me/").content.decode()
    assert "You have no API token." in page
    response = alice_client.post("/accounts/me/token/issue/", follow=True)
    key = Token.objects.get(user=alice).key
    assert key in response.content.decode()
    assert key not in alice_client.get("/accounts/me/").content.decode()  # shown once
    assert key[:6] in alice_client.get("/accounts/me/").content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/me/").json()["username"] == "alice"


def test_replacing_a_token_stops_the_old_one(alice_client, alice):
    alice_client.post("/accounts/me/token/issue/")
    old = Token.objects.get(user=alice).key
    alice_client.post("/accounts/me/token/issue/")
    new = Token.objects.get(user=alice).key
    assert old != new
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {old}")
    assert api.get("/api/me/").status_code == 401


def test_revoking_from_the_profile_page_refuses_the_token(alice_client, alice):
    alice_client.post("/accounts/me/token/issue/")
    key = Token.objects.get(user=alice).key
    alice_client.post("/accounts/me/token/revoke/")
    assert not Token.objects.filter(user=alice).exists()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/me/").status_code == 401


def test_the_token_buttons_need_a_login_and_a_post(alice_client):
    from django.test import Client

    anonymous = Client().post("/accounts/me/token/issue/")
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    assert alice_client.get("/accounts/me/token/issue/")["Location"] == "/accounts/me/"  # a GET changes nothing
    assert not Token.objects.exists()


def test_the_api_rotates_and_revokes_the_callers_token(api, alice):
    assert api.get("/api/token/").json()["exists"] is True
    response = api.post("/api/token/")
    assert response.status_code == 201
    new_key = response.json()["key"]
    assert api.get("/api/me/").status_code == 401  # the key this client sends was replaced
    api.credentials(HTTP_AUTHORIZATION=f"Token {new_key}")
    info = api.get("/api/token/").json()
    assert info["prefix"] == new_key[:6] and "key" not in info
    assert api.delete("/api/token/").status_code == 204
    assert api.get("/api/me/").status_code == 401


def test_tokens_are_managed_in_django_admin(admin_client, alice):
    Token.objects.create(user=alice)
    assert admin_client.get("/admin/authtoken/tokenproxy/").status_code == 200
