"""The console (/ui) in a real browser: Debian's chromium driven by Playwright.

Two servers (started by the fixtures below, on free ports): `oka serve --demo` (over
Redis with `--cache tracking` when OKA_TEST_REDIS_URL is set, as in CI), and
a 200-feature spec (make_spec.py) with API keys, an admin key among them, and
records written through /v1/ingest. Screenshots of each page go to OKA_SCREENSHOTS
(docs/img by default).
"""
import http.client
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml
from playwright.sync_api import sync_playwright

BIN = os.environ["OKA_BIN"]
CHROMIUM = os.environ.get("OKA_CHROMIUM", "/usr/bin/chromium")
WORK = os.environ["OKA_WORK"]
SHOTS = os.environ["OKA_SCREENSHOTS"]
ADMIN = "admin-key-0123456789a"
READER = "reader-key-0123456789"
PAGES = ["#/", "#/feature/{f}", "#/lineage", "#/health", "#/try/{f}"]
SEED = {"target_features": ["simple_feature"], "keys": [{"id": "test-id-21"}],
        "udf_args": {"simple_feature": {"multiplier": 2.0}}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name, args):
        self.port, self.admin_port = free_port(), free_port()
        self.log = open(os.path.join(WORK, name + ".log"), "w")
        self.proc = subprocess.Popen(
            [BIN, "serve", *args, "--listen", f"127.0.0.1:{self.port}", "--admin-listen", f"127.0.0.1:{self.admin_port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/healthz", timeout=1)
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"oka serve did not start; see {self.log.name}")
                time.sleep(0.1)
        self.admin = f"http://127.0.0.1:{self.admin_port}"
        self.serving = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def post(url, body, headers=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def get_json(url, headers=None):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture(scope="session")
def demo():
    # Over Redis with a read cache when there is one (CI sets both variables), so
    # the health page draws the cache's hit rate and size too.
    redis = os.environ.get("OKA_TEST_REDIS_URL")
    if not redis and os.environ.get("OKA_REQUIRE_REDIS") == "1":
        pytest.fail("OKA_REQUIRE_REDIS=1 but OKA_TEST_REDIS_URL is not set")
    s = Server("demo", ["--demo", *(["--store", redis, "--cache", "tracking"] if redis else [])])
    s.cached = bool(redis)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def big_spec():
    path = os.path.join(WORK, "big.yaml")
    subprocess.run(["python", os.path.join(os.path.dirname(__file__), "make_spec.py"), path], check=True)
    with open(path) as f:
        return path, yaml.safe_load(f)


@pytest.fixture(scope="session")
def big(big_spec):
    keys = os.path.join(WORK, "keys.txt")
    with open(keys, "w") as f:
        f.write(f"{ADMIN} admin\n{READER} read,write\n")
    s = Server("big", ["--spec", big_spec[0], "--api-keys-file", keys])
    for i in range(40):
        records = [{"user_id": f"u{k}", "v": i + k / 10, "ts": "2026-01-01T00:00:00Z"} for k in range(5)]
        post(f"{s.serving}/v1/ingest", {"feature": f"pipe_{i}", "records": records}, {"x-api-key": READER})
    yield s
    s.stop()


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


class Watched:
    """A page whose console messages, script errors, failed requests and error
    answers are collected."""

    def __init__(self, browser, **context):
        self.context = browser.new_context(viewport={"width": 1280, "height": 860}, **context)
        self.page = self.context.new_page()
        self.problems, self.dialogs = [], []
        p = self.page
        p.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
        p.on("pageerror", lambda e: self.problems.append(f"script error: {e}"))
        p.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url} {r.failure}"))
        p.on("response", self._response)
        p.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def _response(self, r):
        if r.status >= 400:
            self.problems.append(f"{r.status} {r.url}")

    def open(self, base, hash_):
        self.page.goto(f"{base}/ui{hash_}")
        self.page.wait_for_selector("body[data-ready]")
        return self.page

    def close(self):
        self.context.close()


def first_on_demand(catalog):
    return next(f["name"] for f in catalog["features"] if f["kind"] == "on_demand")


@pytest.mark.parametrize("which", ["demo", "big"])
def test_pages_load_with_no_error_and_no_failed_request(request, browser, which):
    server = request.getfixturevalue(which)
    auth = {"authorization": f"Bearer {ADMIN}"}
    catalog = get_json(f"{server.admin}/ui/api/catalog", auth)
    feature = first_on_demand(catalog)
    w = Watched(browser, http_credentials={"username": "ops", "password": ADMIN}) if which == "big" else Watched(browser)
    started = time.monotonic()
    page = w.open(server.admin, "#/")
    loaded_s = time.monotonic() - started
    # Every byte the first load fetched, uncompressed (the page, its script and
    # style, the registry and the first live sample), by the Resource Timing API.
    first_load = page.evaluate("""() => performance.getEntriesByType('navigation')
        .concat(performance.getEntriesByType('resource'))
        .reduce((sum, e) => sum + e.decodedBodySize, 0)""")
    print(f"{which}: /ui ready in {loaded_s * 1000:.0f} ms, {first_load} bytes fetched")
    assert first_load < 300_000, f"the first load moved {first_load} bytes"
    rows = w.page.locator("[data-testid=pipeline] tr[data-feature], [data-testid=on-demand] tr[data-feature]")
    assert rows.count() == len(catalog["features"])
    for hash_ in PAGES:
        page = w.open(server.admin, hash_.format(f=feature))
        page.wait_for_timeout(1200)  # a live poll or two
    assert w.problems == [], w.problems
    w.close()


def test_search_filters_the_registry(browser, big):
    w = Watched(browser, http_credentials={"username": "ops", "password": ADMIN})
    page = w.open(big.admin, "#/")
    page.fill("input[type=search]", "pipe_15 od_14")  # every word, in name or description
    names = page.locator("[data-testid=on-demand] tr[data-feature]").evaluate_all("rs => rs.map(r => r.dataset.feature)")
    assert names == ["od_15"]
    page.click("text=od_15")
    page.wait_for_selector("h1:has-text('od_15')")
    assert page.locator("[data-testid=definition] code").first.text_content() == "pipe_15.v * scale + od_14.v"
    w.close()


def spec_edges(spec):
    edges = set()
    for name, f in spec["features"].items():
        for d in f.get("dependencies", []):
            edges.add((d if isinstance(d, str) else d["feature"], name))
    return edges


def test_the_lineage_graph_has_every_feature_and_dependency(browser, big, big_spec):
    spec = big_spec[1]
    w = Watched(browser, http_credentials={"username": "ops", "password": ADMIN})
    page = w.open(big.admin, "#/lineage")
    page.wait_for_selector("svg[data-testid=lineage]")
    nodes = page.locator("svg[data-testid=lineage] g[data-feature]").evaluate_all("ns => ns.map(n => n.dataset.feature)")
    assert sorted(nodes) == sorted(spec["features"])
    drawn = page.locator("svg[data-testid=lineage] path.edge:not(.source)").evaluate_all(
        "es => es.map(e => e.dataset.edge.split('→'))")
    assert {tuple(e) for e in drawn} == spec_edges(spec)
    assert len(drawn) == len(spec_edges(spec))
    page.locator("svg[data-testid=lineage] g[data-feature=od_7]").click()
    page.wait_for_selector("h1:has-text('od_7')")
    assert page.url.endswith("#/feature/od_7")
    assert w.problems == [], w.problems
    w.close()


def load(server, seconds, stop):
    """Sends the seed request over one keep-alive connection until told to stop."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    body = json.dumps(SEED)
    end = time.monotonic() + seconds
    while time.monotonic() < end and not stop.is_set():
        conn.request("POST", "/v1/features", body, {"content-type": "application/json"})
        conn.getresponse().read()
        time.sleep(0.004)
    conn.close()


def chart_latest(page, title, key):
    v = page.locator(f'svg[data-chart="{title}"]').get_attribute(f"data-latest-{key}")
    return float(v) if v else None


def test_the_live_chart_moves_and_matches_stats(browser, demo):
    w = Watched(browser)
    page = w.open(demo.admin, "#/health")
    page.wait_for_selector('svg[data-chart="Requests per second"]')
    before = chart_latest(page, "Requests per second", "qps")
    stop = threading.Event()
    loader = threading.Thread(target=load, args=(demo, 20, stop))
    loader.start()
    try:
        page.wait_for_timeout(7000)  # the 5-second window fills
        matched = []
        for _ in range(5):
            s1 = get_json(f"{demo.admin}/stats")["qps"]
            page.wait_for_timeout(1100)
            shown = chart_latest(page, "Requests per second", "qps")
            s2 = get_json(f"{demo.admin}/stats")["qps"]
            lo, hi = min(s1, s2), max(s1, s2)
            matched.append((s1, shown, s2))
            # The chart's point is /stats's window, sampled between the two reads.
            if shown is not None and lo * 0.8 - 1 <= shown <= hi * 1.2 + 1:
                break
        else:
            pytest.fail(f"the chart never matched /stats: {matched}")
        assert shown > 0 and shown != before, (before, shown)
        per_feature = page.locator("[data-testid=per-feature] tr[data-feature=simple_feature]")
        assert per_feature.count() == 1
        if demo.cached:
            # One key asked again and again: the cache answers most of it.
            hit_rate = chart_latest(page, "Cache hit rate", "hit_rate")
            assert hit_rate is not None and hit_rate > 0.5, hit_rate
        else:
            assert page.locator('svg[data-chart="Cache hit rate"]').count() == 0
    finally:
        stop.set()
        loader.join()
    assert w.problems == [], w.problems
    w.close()


def run_curl(command, key=None):
    env = dict(os.environ)
    if key:
        env["OKA_API_KEY"] = key
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30, env=env, check=True)
    return json.loads(out.stdout)


def without_server_id(answer):
    return {k: v for k, v in answer.items() if k != "server_id"}


def test_try_it_answers_as_curl_does(browser, big):
    w = Watched(browser, http_credentials={"username": "ops", "password": ADMIN})
    page = w.open(big.admin, "#/try/od_5")
    page.fill("input[data-key=user_id]", "u3")
    page.fill("input[data-arg=scale]", "2.5")
    page.fill("[data-testid=try-key]", READER)
    page.click("[data-testid=try-send]")
    page.wait_for_selector("[data-testid=try-response]")
    assert page.text_content("[data-testid=try-status]") == "200"
    assert page.locator("[data-testid=try-key-status]").all_text_contents() == ["key 1: present"]
    timing = page.text_content("[data-testid=timing]")
    assert all(phase in timing for phase in ("parse", "storage", "udf", "encode")), timing
    shown = json.loads(page.text_content("[data-testid=try-response]"))
    curl = page.text_content("[data-testid=try-curl]")
    assert "$OKA_API_KEY" in curl and READER not in curl, curl
    by_curl = run_curl(curl, READER)
    assert without_server_id(shown) == without_server_id(by_curl)
    # pipe_5.v * 2.5 + od_4.v, od_4 = pipe_4.v at its default scale (u3: v = i + 0.3).
    assert shown["results"]["od_5"][0][0]["v"] == pytest.approx(5.3 * 2.5 + 4.3)
    python = page.text_content("[data-testid=try-python]")
    assert 'client.get_features(["od_5"], [{"user_id": "u3"}], udf_args={"od_5": {"scale": 2.5}})' in python
    # Without a key the serving port's refusal is what the page shows.
    page.fill("[data-testid=try-key]", "")
    page.click("[data-testid=try-send]")
    page.wait_for_selector("[data-testid=try-status]:has-text('401')")
    w.problems = [p for p in w.problems if "/ui/api/try" not in p]
    assert w.problems == [], w.problems
    w.close()


def test_try_it_on_the_demo(browser, demo):
    w = Watched(browser)
    page = w.open(demo.admin, "#/try/simple_feature")
    page.fill("input[data-key=id]", "test-id-21")
    page.fill("input[data-arg=multiplier]", "2")
    page.click("[data-testid=try-send]")
    page.wait_for_selector("[data-testid=try-response]")
    shown = json.loads(page.text_content("[data-testid=try-response]"))
    assert shown["results"]["simple_feature"][0][0]["value"] == 42.0
    assert '"value": 42.0' in page.text_content("[data-testid=try-response]"), "numbers keep their form"
    by_curl = run_curl(page.text_content("[data-testid=try-curl]"))
    assert by_curl["results"]["simple_feature"][0][0]["value"] == 42.0
    # A range read takes query_args; what is not JSON is refused on the page.
    page = w.open(demo.admin, "#/try/window_feature")
    page.fill("input[data-key=id]", "test-id-21")
    page.fill("[data-testid=try-query]", "{start")
    page.click("[data-testid=try-send]")
    page.wait_for_selector("text=query_args is not a JSON object")
    page.fill("[data-testid=try-query]", '{"start": "2000-01-01T00:00:00Z"}')
    page.click("[data-testid=try-send]")
    page.wait_for_selector("[data-testid=try-status]:has-text('200')")
    assert '"query_args":{"window_feature":{"start":"2000-01-01T00:00:00Z"}}' in page.text_content("[data-testid=try-curl]")
    assert 'query_args={"window_feature": {"start": "2000-01-01T00:00:00Z"}}' in page.text_content("[data-testid=try-python]")
    assert w.problems == [], w.problems
    w.close()


def test_html_and_script_in_the_spec_render_as_text(browser, big, big_spec):
    hostile = big_spec[1]["features"]["hostile"]
    w = Watched(browser, http_credentials={"username": "ops", "password": ADMIN})
    page = w.open(big.admin, "#/feature/hostile")
    assert page.text_content("[data-testid=description]") == hostile["description"]
    assert page.text_content("[data-testid=args]").count(hostile["args"]["label"]["default"]) == 1
    assert "'<b onmouseover=alert(1)>bold</b>' + label" in page.text_content("[data-testid=definition]")
    page = w.open(big.admin, "#/?q=hostile")
    assert hostile["description"] in page.text_content("[data-testid=on-demand]")
    page = w.open(big.admin, "#/try/hostile")
    page.fill("input[data-key=user_id]", "u1")
    page.fill("[data-testid=try-key]", READER)
    page.click("[data-testid=try-send]")
    page.wait_for_selector("[data-testid=try-response]")
    assert "<b onmouseover=alert(1)>bold</b><script>alert('default')</script>" in page.text_content("[data-testid=try-response]")
    for hash_ in ("#/lineage", "#/health", "#/feature/hostile"):
        page = w.open(big.admin, hash_)
        page.wait_for_timeout(300)
        injected = page.evaluate("""() => ({
            scripts: document.scripts.length,
            imgs: document.querySelectorAll('img').length,
            bold: document.querySelectorAll('main b').length,
            handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
        })""")
        assert injected == {"scripts": 1, "imgs": 0, "bold": 0, "handlers": 0}, (hash_, injected)
    assert w.dialogs == [], w.dialogs
    w.problems = [p for p in w.problems if "/ui/api/try" not in p]
    assert w.problems == [], w.problems
    w.close()


def test_reloads_are_listed_on_the_health_page(browser, big):
    post(f"{big.admin}/admin/reload", {}, {"authorization": f"Bearer {ADMIN}"})
    w = Watched(browser, http_credentials={"username": "ops", "password": ADMIN})
    page = w.open(big.admin, "#/health")
    page.wait_for_selector("[data-testid=reloads] table")
    row = page.locator("[data-testid=reloads] tr").nth(1).text_content()
    assert "ok" in row and "200 features, 2 API keys" in row, row
    assert w.problems == [], w.problems
    w.close()


def test_with_admin_keys_the_console_needs_one(browser, big):
    # No key, or a wrong one: the server asks for Basic auth, and the browser
    # shows the 401 or gives up asking (Chromium then fails the navigation with
    # ERR_INVALID_AUTH_CREDENTIALS); either way nothing of the page loads.
    for creds in ({}, {"http_credentials": {"username": "ops", "password": "not-a-key-at-all-000"}}):
        context = browser.new_context(**creds)
        page = context.new_page()
        try:
            response = page.goto(f"{big.admin}/ui")
            assert response.status == 401, (creds, response.status)
            assert "an API key is required" in page.content() or "unknown API key" in page.content()
        except Exception as e:  # Playwright's navigation error
            assert "ERR_INVALID_AUTH_CREDENTIALS" in str(e), e
        assert page.locator("body[data-ready]").count() == 0
        context.close()
    # A key without the admin scope: refused.
    context = browser.new_context(http_credentials={"username": "ops", "password": READER})
    page = context.new_page()
    response = page.goto(f"{big.admin}/ui")
    assert response.status == 403
    assert "lacks the `admin` scope" in page.content()
    context.close()
    for path in ("/ui", "/ui/api/live", "/ui/api/catalog"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(big.admin + path, timeout=5)
        assert e.value.code == 401
        assert e.value.headers["www-authenticate"].startswith('Basic realm="Oka console"')


def test_screenshots(browser, demo):
    """Writes docs/img/console-*.png (the README and docs/operations.md show them)."""
    os.makedirs(SHOTS, exist_ok=True)
    stop = threading.Event()
    loader = threading.Thread(target=load, args=(demo, 30, stop))
    loader.start()
    w = Watched(browser)
    try:
        for name, hash_ in (("health", "#/health"), ("registry", "#/"), ("feature", "#/feature/simple_feature"),
                            ("lineage", "#/lineage")):
            page = w.open(demo.admin, hash_)
            page.wait_for_timeout(8000 if name == "health" else 1500)
            page.screenshot(path=os.path.join(SHOTS, f"console-{name}.png"), full_page=True)
        page = w.open(demo.admin, "#/try/simple_feature")
        page.fill("input[data-key=id]", "test-id-21")
        page.fill("input[data-arg=multiplier]", "2")
        page.click("[data-testid=try-send]")
        page.wait_for_selector("[data-testid=try-response]")
        page.screenshot(path=os.path.join(SHOTS, "console-try.png"), full_page=True)
    finally:
        stop.set()
        loader.join()
    for name in ("health", "registry", "feature", "lineage", "try"):
        assert os.path.getsize(os.path.join(SHOTS, f"console-{name}.png")) > 10_000
    w.close()
