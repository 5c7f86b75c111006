"""The web console in a real browser: Debian's headless Chromium driven by selenium (Debian's
chromium-driver) against a live `larder serve --rules` on 127.0.0.1, port 0. Every action goes
through the public API with the signed-in user's token; screenshots of each view are written to
docs/console/ (committed, shown in the README)."""
import hashlib
import os
import shutil
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest
import requests

from larder_server import LarderServer

REPO = Path(__file__).resolve().parent.parent
SHOTS = REPO / "docs" / "console"
RULES = """rules_version = '2';
service firebase.storage {
  match /b/{bucket}/o {
    match /users/{uid}/{path=**} { allow read, write: if request.auth != null && request.auth.uid == uid; }
    match /locked/{path=**} { allow read: if request.auth != null; }
  }
}
"""

try:
    from selenium import webdriver
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover
    webdriver = None


def need_browser():
    missing = [what for what, ok in [("selenium (PyPI)", webdriver is not None),
                                     ("chromium", shutil.which("chromium")),
                                     ("chromedriver (Debian chromium-driver)", shutil.which("chromedriver"))] if not ok]
    if missing:
        print(f"\n*** SKIPPED: console browser tests, missing {', '.join(missing)} (run scripts/deps.sh) ***")
        pytest.skip(f"*** console browser tests SKIPPED: missing {', '.join(missing)} ***")


def png(width, height):
    """A real PNG (a colour gradient), made here."""
    raw = b"".join(b"\0" + b"".join(bytes((x * 255 // width, y * 255 // height, 160)) for x in range(width))
                   for y in range(height))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def pdf():
    """A one-page PDF saying hello, with a correct xref table."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
               None, b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    stream = b"BT /F1 24 Tf 40 100 Td (Hello from Larder) Tj ET"
    objects[3] = b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"
    out, offsets = b"%PDF-1.4\n", []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)


@pytest.fixture
def console(tmp_path):
    need_browser()
    rules = tmp_path / "storage.rules"
    rules.write_text(RULES)
    server = LarderServer(tmp_path / "data", allow_all=False, extra=["--rules", str(rules)])
    token = subprocess.run([os.environ["LARDER_BIN"], "token", "--uid", "dev", "--ttl", "1h", "--data", str(tmp_path / "data")],
                           capture_output=True, text=True, check=True).stdout.strip()
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=shutil.which("chromedriver")))
    driver.implicitly_wait(0)
    try:
        yield server, token, driver, tmp_path
    finally:
        driver.quit()
        server.stop()


def wait(driver, condition, timeout=20):
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d))


def by_id(driver, id_):
    return driver.find_element(By.ID, id_)


def link(driver, text):
    # In one script: the table is re-rendered as pages arrive, so elements found earlier go stale.
    return driver.execute_script(
        "return [...document.querySelectorAll('#listing a')].find((a) => a.textContent === arguments[0]) || null", text)


def shot(driver, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def test_console_main_flows(console):
    server, token, d, tmp = console
    auth = {"Authorization": f"Bearer {token}"}
    files = {"photo.png": png(320, 200), "notes.txt": b"Shopping list\n- flour\n- eggs\n",
             "hello.pdf": pdf()}
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    big = tmp / "video.bin"
    big.write_bytes(os.urandom(96 << 20))

    # `/` redirects to the console; without a token it asks for one.
    d.get(server.url + "/")
    wait(d, lambda d: by_id(d, "signin").is_displayed())
    assert d.current_url.endswith("/console/")
    shot(d, "1-sign-in")
    # Keyboard only: the token field has focus; Tab to the button, Enter.
    active = d.switch_to.active_element
    assert active.get_attribute("id") == "token"
    active.send_keys(token)
    active.send_keys(Keys.TAB)
    d.switch_to.active_element.send_keys(Keys.ENTER)
    wait(d, lambda d: by_id(d, "browser").is_displayed())
    by_id(d, "bucket").send_keys("app", Keys.ENTER)
    # The bucket's root is not listable under these rules: the server's refusal is shown.
    wait(d, lambda d: by_id(d, "status").text.startswith("403"))

    # The make-serve style deep link: straight into users/dev/ (the token stays in sessionStorage).
    d.get(server.url + "/console/#bucket=app&prefix=users%2Fdev%2F")
    d.refresh()
    wait(d, lambda d: "0 objects" in by_id(d, "status").text and "dev" in by_id(d, "crumbs").text)

    # A large upload shows progress, is paused, the page reloaded, and it resumes.
    by_id(d, "files").send_keys(str(big))
    bar = wait(d, lambda d: (b := d.find_elements(By.CSS_SELECTOR, "#uploads progress")) and float(b[0].get_attribute("value")) > 0 and b[0])
    d.find_element(By.CSS_SELECTOR, "#uploads button").click()
    wait(d, lambda d: "paused at" in by_id(d, "uploads").text)
    shot(d, "2-upload-paused")
    paused = float(bar.get_attribute("value"))
    assert 0 < paused < big.stat().st_size
    d.refresh()
    wait(d, lambda d: by_id(d, "browser").is_displayed() and "objects" in by_id(d, "status").text)
    by_id(d, "files").send_keys(str(big))
    wait(d, lambda d: "resumed at" in by_id(d, "uploads").text)
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#uploads li[data-state=done]"), timeout=120)
    meta = requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Fvideo.bin", headers=auth).json()
    assert meta["sha256"] == hashlib.sha256(big.read_bytes()).hexdigest()

    # Several files at once.
    by_id(d, "files").send_keys("\n".join(str(tmp / n) for n in files))
    wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#uploads li[data-state=done]")) == 4, timeout=60)
    wait(d, lambda d: all(link(d, n) for n in [*files, "video.bin"]))
    time.sleep(0.5)  # every finished upload reloads the listing: each object must appear once
    names = d.execute_script("return [...document.querySelectorAll('#listing a')].map((a) => a.textContent)")
    assert sorted(names) == sorted([*files, "video.bin"]), names
    shot(d, "3-listing")

    # Image preview, from fetched bytes on a blob: URL.
    link(d, "photo.png").click()
    img = wait(d, lambda d: (i := d.find_elements(By.CSS_SELECTOR, "#preview img")) and d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", i[0]) and i[0])
    assert img.get_attribute("src").startswith("blob:")
    assert "image/png" in by_id(d, "facts").text and meta["sha256"] != ""
    shot(d, "4-image-preview")

    # PDF preview: a frame on a blob: URL typed application/pdf (the browser's PDF viewer).
    link(d, "hello.pdf").click()
    frame = wait(d, lambda d: (f := d.find_elements(By.CSS_SELECTOR, "#preview iframe")) and f[0])
    assert frame.get_attribute("src").startswith("blob:")
    time.sleep(1)
    shot(d, "5-pdf-preview")

    # Text preview, then custom metadata added and read back over the API.
    link(d, "notes.txt").click()
    wait(d, lambda d: "Shopping list" in by_id(d, "preview").text)
    by_id(d, "meta-add").click()
    d.switch_to.active_element.send_keys("owner", Keys.TAB, "ada")
    d.find_element(By.CSS_SELECTOR, "#meta-form button[type=submit]").click()
    wait(d, lambda d: by_id(d, "panel-status").text == "Metadata saved.")
    got = requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Fnotes.txt", headers=auth).json()
    assert got["metadata"] == {"owner": "ada"}
    shot(d, "6-text-and-metadata")
    # Removing the key removes it on the server too.
    d.find_element(By.CSS_SELECTOR, ".meta-row button").click()
    d.find_element(By.CSS_SELECTOR, "#meta-form button[type=submit]").click()
    wait(d, lambda d: requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Fnotes.txt", headers=auth).json().get("metadata") in (None, {}))

    # Copy download URL: it works without the Authorization header (the token is in it).
    by_id(d, "copy-url").click()
    url = wait(d, lambda d: by_id(d, "url").get_attribute("value"))
    assert requests.get(url).content == files["notes.txt"]
    by_id(d, "rotate").click()
    wait(d, lambda d: "rotated" in by_id(d, "panel-status").text)
    assert requests.get(url).status_code == 403
    assert requests.get(by_id(d, "url").get_attribute("value")).content == files["notes.txt"]

    # Delete, with confirmation.
    by_id(d, "delete").click()
    wait(d, lambda d: by_id(d, "confirm").is_displayed())
    shot(d, "7-delete-confirm")
    d.find_element(By.CSS_SELECTOR, "#confirm button[value=ok]").click()
    wait(d, lambda d: link(d, "notes.txt") is None)
    assert requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Fnotes.txt", headers=auth).status_code == 404

    # A rules-denied upload shows the server's refusal on that file.
    d.get(server.url + "/console/#bucket=app&prefix=locked%2F")
    d.refresh()
    wait(d, lambda d: "objects" in by_id(d, "status").text)
    by_id(d, "files").send_keys(str(tmp / "notes.txt"))
    refusal = wait(d, lambda d: (e := d.find_elements(By.CSS_SELECTOR, "#uploads .error")) and e[0].text)
    assert refusal.startswith("403")
    shot(d, "8-refused")

    # Keyboard only: from the filter field, Tab to the first object, Enter opens its panel.
    d.get(server.url + "/console/#bucket=app&prefix=users%2Fdev%2F")
    d.refresh()
    wait(d, lambda d: link(d, "photo.png"))
    by_id(d, "filter").click()
    for _ in range(12):
        ActionChains(d).send_keys(Keys.TAB).perform()  # keys to the page, as a keyboard sends them
        if d.switch_to.active_element.text == "hello.pdf":
            break
    assert d.switch_to.active_element.text == "hello.pdf"
    ActionChains(d).send_keys(Keys.ENTER).perform()
    wait(d, lambda d: by_id(d, "panel").is_displayed() and d.switch_to.active_element.get_attribute("id") == "panel")

    # Usable on a 375 px wide phone: nothing wider than the viewport.
    d.set_window_size(375, 800)
    link(d, "photo.png").click()
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#preview img"))
    assert d.execute_script("return document.documentElement.scrollWidth") <= 375
    shot(d, "9-phone")

    # No console errors, no CSP violations.
    logs = d.get_log("browser")
    bad = [e for e in logs if e["level"] == "SEVERE" or "Content Security Policy" in e["message"]]
    # The refusals this test provokes (403s) are logged by Chromium as failed requests: expected.
    bad = [e for e in bad if not ("Failed to load resource" in e["message"] and "403" in e["message"])]
    assert not bad, bad
