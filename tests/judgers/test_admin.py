import pytest

from rlweb.judgers import services

pytestmark = pytest.mark.django_db


def test_the_admin_never_shows_http_headers(admin_client, django_user_model):
    owner = django_user_model.objects.create_user("owner")
    judger = services.save_judger(owner, "remote", "http", {"url": "http://127.0.0.1:9/score", "headers": {"Authorization": "Bearer s3cret"}})
    html = admin_client.get(f"/admin/judgers/judgerconfig/{judger.pk}/change/").content.decode()
    assert "s3cret" not in html and "Authorization: ••• set" in html
