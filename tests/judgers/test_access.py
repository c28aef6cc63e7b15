"""Bob cannot see, use or change alice's judgers, nor try them on her datasets."""

import pytest

from rlweb.datasets.services import generate_arith_dataset
from rlweb.judgers import services
from rlweb.judgers.models import JudgerConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def alices(alice):
    judger = services.save_judger(alice, "alices-numeric", "numeric", {})
    dataset = generate_arith_dataset(alice, "alices-arith", n_train=10, n_eval=0, seed=0)
    return judger, dataset


def test_bob_gets_404_on_every_page_and_action_of_alices_judger(client, bob, alices):
    judger, dataset = alices
    client.force_login(bob)
    for url in ("", "edit/", "delete/"):
        assert client.get(f"/judgers/{judger.pk}/{url}").status_code == 404, url
    posts = {
        "edit/": {"name": "hijacked", "ray_actors": "0"},
        "try/": {"response": "1", "label": "1"},
        "dry-run/": {"dataset": str(dataset.pk), "limit": "10", "response_template": "{answer}"},
        "delete/": {},
    }
    for url, data in posts.items():
        assert client.post(f"/judgers/{judger.pk}/{url}", data).status_code == 404, url
    judger.refresh_from_db()
    assert judger.name == "alices-numeric" and JudgerConfig.objects.count() == 1
    assert "alices-numeric" not in client.get("/judgers/").content.decode()


def test_bob_cannot_route_to_alices_judger_through_the_form(client, bob, alices):
    client.force_login(bob)
    services.save_judger(bob, "bobs", "exact", {})
    # The select only offers bob's judgers; a forged value is refused.
    form = client.get("/judgers/new/router/").content.decode()
    assert "alices-numeric" not in form and ">bobs (exact)<" in form
    response = client.post("/judgers/new/router/", {"name": "r", "ray_actors": "0", "mode": "by_data_source", "route_0_source": "x", "route_0_judger": "alices-numeric"})
    assert response.status_code == 400 and not JudgerConfig.objects.filter(owner=bob, name="r").exists()


def test_bob_cannot_try_his_judger_on_alices_dataset_rows(client, bob, alices):
    _, dataset = alices
    client.force_login(bob)
    mine = services.save_judger(bob, "bobs", "numeric", {})
    detail = client.get(f"/judgers/{mine.pk}/").content.decode()
    assert "alices-arith" not in detail
    response = client.post(f"/judgers/{mine.pk}/try/", {"response": "1", "dataset": str(dataset.pk), "row": "0"})
    assert response.status_code == 400 and "alices" not in response.content.decode()
    response = client.post(f"/judgers/{mine.pk}/dry-run/", {"dataset": str(dataset.pk), "limit": "10", "response_template": "{answer}"})
    assert response.status_code == 400


def test_alice_runs_a_dry_run_from_the_page(alice_client, alices):
    judger, dataset = alices
    response = alice_client.post(f"/judgers/{judger.pk}/dry-run/", {"dataset": str(dataset.pk), "limit": "10", "response_template": "{answer}"}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200 and "100% pass" in html and "10 of 10 rows of alices-arith" in html
    broken = alice_client.post(f"/judgers/{judger.pk}/dry-run/", {"dataset": str(dataset.pk), "limit": "10", "response_template": "no digits: {answer}", "threshold": "1"}, headers={"HX-Request": "true"})
    assert "100% pass" in broken.content.decode()  # 'no digits: 82' still has the number at the end
    worded = alice_client.post(f"/judgers/{judger.pk}/dry-run/", {"dataset": str(dataset.pk), "limit": "10", "response_template": "{answer} and 1000"}, headers={"HX-Request": "true"})
    html = worded.content.decode()
    assert "0% pass" in html and 'class="failing"' in html


def test_staff_may_open_alices_judger_and_its_references_stay_hers(client, staff, alice, alices):
    judger, _ = alices
    services.save_judger(alice, "router", "router", {"mode": "by_data_source", "default": {"ref": "alices-numeric"}})
    client.force_login(staff)
    router = JudgerConfig.objects.get(name="router")
    assert client.get(f"/judgers/{router.pk}/edit/").status_code == 200
    response = client.post(f"/judgers/{router.pk}/edit/", {"name": "router", "ray_actors": "0", "mode": "by_data_source", "default": "alices-numeric"})
    assert response.status_code == 302
    assert JudgerConfig.objects.get(name="router").owner == alice
