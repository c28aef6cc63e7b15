import pytest

from rlweb.judgers import services

pytestmark = pytest.mark.django_db


def test_the_admin_never_shows_http_headers(admin_client, django_user_model):
    owner = django_user_model.objects.create_user("owner")
    judger = services.save_judger(owner, "remote", "http", {"url": "http://127.0.0.1:9/score", "headers": {"Authorization": "Bearer s3cret"}})
    html = admin_client.get(f"/admin/judgers/judgerconfig/{judger.pk}/change/").content.decode()
    assert "s3cret" not in html and "Authorization: ••• set" in html


def test_a_urls_password_and_query_values_are_not_shown_on_the_detail_page(alice_client, alice):
    judger = services.save_judger(alice, "remote", "http", {"url": "http://user:pw123@127.0.0.1:9/score?token=abc987"})
    html = alice_client.get(f"/judgers/{judger.pk}/").content.decode()
    assert "pw123" not in html and "abc987" not in html
    assert "http://user:•••@127.0.0.1:9/score?token=•••" in html
