"""Who may see what: login on every URL, and owners (alice) versus others (bob)."""

import re
import uuid

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from rlweb.core.ownership import get_visible_or_404
from rlweb.datasets.models import Dataset
from rlweb.judgers.models import JudgerConfig
from rlweb.runs.models import Run

pytestmark = pytest.mark.django_db

# The only URLs an anonymous visitor may load: the login page itself, the health probe, and
# Django admin's own login/logout (admin pages redirect to it). Everything else must redirect
# to login (pages) or answer 401/403 (API).
OPEN_URLS = {"/accounts/login/", "/healthz", "/admin/login/", "/admin/logout/"}

_SAMPLE_VALUES = {"int": "1", "str": "x", "slug": "x", "path": "x", "uuid": str(uuid.UUID(int=1))}


def _fill_route(route: str) -> str:
    def sub(match):
        converter = match.group(1) or "str"
        return _SAMPLE_VALUES.get(converter, "1")

    return re.sub(r"<(?:(\w+):)?\w+>", sub, route)


def _fill_regex(regex: str) -> str:
    # Admin's regex routes: drop anchors, put a sample value in each named group.
    regex = regex.lstrip("^").rstrip("$").replace("\\Z", "")
    regex = re.sub(r"\(\?P<\w+>[^)]*\)", "1", regex)
    return regex.replace("\\", "")


def walk(patterns, prefix=""):
    for p in patterns:
        route = str(p.pattern)
        part = _fill_route(route) if "<" in route and "(?P" not in route else _fill_regex(route) if "(?P" in route or route.startswith("^") else route
        if isinstance(p, URLResolver):
            yield from walk(p.url_patterns, prefix + part)
        elif isinstance(p, URLPattern):
            yield "/" + (prefix + part)


def all_urls():
    urls = sorted(set(walk(get_resolver().url_patterns)))
    return [u for u in urls if "static" not in u and "(" not in u]


def test_the_url_walk_finds_every_app():
    urls = all_urls()
    for prefix in ("/runs/", "/datasets/", "/judgers/", "/admin/", "/api/"):
        assert any(u.startswith(prefix) for u in urls), prefix


@pytest.mark.parametrize("url", all_urls())
def test_no_url_answers_an_anonymous_visitor_with_content(client, url):
    if url in OPEN_URLS:
        return
    for method in ("get", "post"):
        response = getattr(client, method)(url)
        if url.startswith("/api/"):
            assert response.status_code in (401, 403), f"{method.upper()} {url} -> {response.status_code}"
        else:
            assert response.status_code == 302, f"{method.upper()} {url} -> {response.status_code}"
            assert "login" in response["Location"], f"{url} redirects to {response['Location']}"


def test_every_page_answers_a_signed_in_admin_with_200_or_a_redirect(admin_client):
    for url in all_urls():
        if "/admin/" in url or url.startswith("/api/"):
            continue
        response = admin_client.get(url)
        # 405: an action that changes something (log out, cancel a run) takes only POST.
        assert response.status_code in (200, 301, 302, 404, 405), f"GET {url} -> {response.status_code}"


def test_the_login_page_logs_a_user_in_and_shows_the_navigation(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-password-1"}, follow=True)
    html = response.content.decode()
    for item in ("Runs", "Datasets", "Judgers"):
        assert f">{item}</a>" in html
    assert ">Admin</a>" not in html  # alice is not staff


def test_staff_see_the_admin_link(client, staff):
    client.force_login(staff)
    assert ">Admin</a>" in client.get("/runs/").content.decode()


def test_a_wrong_password_shows_an_error_and_logs_nobody_in(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "didn't match" in response.content.decode()
    assert client.get("/runs/").status_code == 302


def make_objects(owner):
    return (
        Run.objects.create(owner=owner, name="alices run", config={}),
        Dataset.objects.create(owner=owner, name="alices data"),
        JudgerConfig.objects.create(owner=owner, name="alices judger", kind="numeric"),
    )


def test_a_user_sees_only_what_they_own_and_staff_see_all(alice, bob, staff):
    run, dataset, judger = make_objects(alice)
    for model, obj in ((Run, run), (Dataset, dataset), (JudgerConfig, judger)):
        assert list(model.objects.visible_to(alice)) == [obj]
        assert list(model.objects.visible_to(bob)) == []
        assert list(model.objects.visible_to(staff)) == [obj]
        assert obj.is_visible_to(alice) and not obj.is_visible_to(bob) and obj.is_visible_to(staff)


def test_another_users_object_is_not_found_rather_than_forbidden(alice, bob):
    from django.http import Http404

    run, _, _ = make_objects(alice)
    assert get_visible_or_404(Run, alice, pk=run.pk) == run
    with pytest.raises(Http404):
        get_visible_or_404(Run, bob, pk=run.pk)
    with pytest.raises(Http404):
        get_visible_or_404(Run, alice, pk="not-a-number")


def test_bob_gets_404_on_alices_pages_and_does_not_see_them_listed(client, alice, bob):
    run, dataset, judger = make_objects(alice)
    client.force_login(bob)
    for url in (f"/runs/{run.pk}/", f"/datasets/{dataset.pk}/", f"/judgers/{judger.pk}/"):
        assert client.get(url).status_code == 404, url
    for url, name in (("/runs/", "alices run"), ("/datasets/", "alices data"), ("/judgers/", "alices judger")):
        assert name not in client.get(url).content.decode()
    client.force_login(alice)
    for url in (f"/runs/{run.pk}/", f"/datasets/{dataset.pk}/", f"/judgers/{judger.pk}/"):
        assert client.get(url).status_code == 200, url


# src="…" / href="…" / url(…) that name a scheme and a host: anything the browser would fetch
# from elsewhere. Plain links to documentation would also match, and the pages have none.
_EXTERNAL_ASSET = re.compile(r"""(?:src|href)\s*=\s*["']\s*(?:https?:)?//|url\(\s*["']?(?:https?:)?//""", re.I)


def test_no_page_loads_anything_from_another_host(client, alice):
    # The service runs with no internet: scripts, styles, fonts and images come from the app.
    run, dataset, judger = make_objects(alice)
    client.force_login(alice)
    anonymous = client.get("/accounts/login/").content.decode()
    assert _EXTERNAL_ASSET.search(anonymous) is None
    pages = ["/runs/", "/runs/new/", f"/runs/{run.pk}/", f"/review/runs/{run.pk}/samples/",
             "/datasets/", "/datasets/new/", f"/datasets/{dataset.pk}/", "/judgers/", "/judgers/new/",
             f"/judgers/{judger.pk}/", "/accounts/me/"]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, f"GET {url} -> {response.status_code}"
        html = response.content.decode()
        assert "<html" in html.lower(), url
        found = _EXTERNAL_ASSET.search(html)
        assert found is None, f"{url} loads {html[found.start():found.start() + 120]!r}"
