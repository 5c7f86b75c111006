"""The web console in a real browser: Debian's headless Chromium driven by selenium (Debian's
chromium-driver) against a live `larder serve --rules` on 127.0.0.1, port 0. Every action goes
through the public API with the signed-in user's token; screenshots of each view are written to
docs/console/ (committed, shown in docs/console.md)."""
import hashlib
import os
import re
from concurrent.futures import ThreadPoolExecutor
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
    match /users/{uid}/{path=**} {
      allow read, create, update: if request.auth != null && request.auth.uid == uid;
      // Names ending in .locked cannot be deleted: the folder delete must list them as refused.
      allow delete: if request.auth != null && request.auth.uid == uid && !resource.name.matches('.*[.]locked$');
    }
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


def chrome(downloads=None):
    """Headless Chromium, its console log kept; files it downloads go to `downloads`."""
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if downloads:
        options.add_experimental_option("prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=shutil.which("chromedriver")))
    driver.implicitly_wait(0)
    if downloads:
        driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    return driver


def rules_server(rules_file, data_dir, extra=()):
    """`larder serve --rules RULES` on `data_dir`, and a one-hour token of the user "dev"."""
    rules_file.write_text(RULES)
    server = LarderServer(data_dir, allow_all=False, extra=["--rules", str(rules_file), *extra])
    token = subprocess.run([os.environ["LARDER_BIN"], "token", "--uid", "dev", "--ttl", "1h", "--data", str(data_dir)],
                           capture_output=True, text=True, check=True).stdout.strip()
    return server, token


@pytest.fixture
def console(tmp_path):
    need_browser()
    # A small upload limit, so a too-large file is refused by the server (the big file fits).
    server, token = rules_server(tmp_path / "storage.rules", tmp_path / "data", extra=["--max-upload-size", "100MiB"])
    driver = chrome()
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


def entries(driver):
    """How many entries of the (virtual) listing are in the DOM."""
    return driver.execute_script("return document.querySelectorAll('#listing .entry').length")


def upload_item(driver, name):
    """The upload list's item for object `name`, as {state, text}, or None."""
    return driver.execute_script(
        "const li = [...document.querySelectorAll('#uploads li')].find((l) => l.dataset.name === arguments[0]);"
        "return li ? {state: li.dataset.state || '', text: li.textContent} : null", name)


def click(driver, css):
    """Clicks the element `css` names, looking it up again if the virtual listing redrew it."""
    from selenium.common.exceptions import StaleElementReferenceException
    def attempt(d):
        try:
            d.find_element(By.CSS_SELECTOR, css).click()
            return True
        except StaleElementReferenceException:
            return False
    wait(driver, attempt)


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
    from selenium.webdriver.support.ui import Select
    Select(by_id(d, "bucket")).select_by_value("app")
    # The bucket's root is not listable under these rules: the refusal is said in words.
    wait(d, lambda d: by_id(d, "status").text == "The rules do not allow you to list the top of bucket app (403).")

    # The make-serve style deep link: straight into users/dev/ (the token stays in sessionStorage).
    d.get(server.url + "/console/#bucket=app&prefix=users%2Fdev%2F")
    d.refresh()
    wait(d, lambda d: "0 objects" in by_id(d, "status").text and "dev" in by_id(d, "crumbs").text)

    # A large upload shows progress, is paused, the page reloaded, and it resumes.
    by_id(d, "files").send_keys(str(big))
    bar = wait(d, lambda d: (b := d.find_elements(By.CSS_SELECTOR, "#uploads progress")) and float(b[0].get_attribute("value")) > 0 and b[0])
    # Progress carries a speed and the time left.
    wait(d, lambda d: re.search(r"of 96\.0 MiB, [\d.]+ (B|KiB|MiB|GiB)/s, .+ left", by_id(d, "uploads").text))
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

    # Sort by size (largest first), by date, back to name; filter by a name prefix.
    listed = lambda: d.execute_script("return [...document.querySelectorAll('#listing a')].map((a) => a.textContent)")
    Select(by_id(d, "sort")).select_by_value("size")
    wait(d, lambda d: listed() == ["video.bin", "photo.png", "hello.pdf", "notes.txt"])
    Select(by_id(d, "sort")).select_by_value("name")
    wait(d, lambda d: listed() == ["hello.pdf", "notes.txt", "photo.png", "video.bin"])
    by_id(d, "filter").send_keys("ph")
    wait(d, lambda d: listed() == ["photo.png"])
    by_id(d, "filter").send_keys(Keys.CONTROL, "a", Keys.DELETE)
    wait(d, lambda d: len(listed()) == 4)

    # Grid view: the image's tile shows the server's variant (a blob: URL of a webp thumbnail);
    # the others a type icon.
    d.find_element(By.CSS_SELECTOR, "[data-view=grid]").click()
    assert by_id(d, "listing").get_attribute("class") == "grid"
    thumb = wait(d, lambda d: d.execute_script(
        "const i = document.querySelector('#listing .tile img.thumbnail');"
        "return i && i.complete && i.naturalWidth ? {src: i.src, w: i.naturalWidth, h: i.naturalHeight} : null"))
    assert thumb["src"].startswith("blob:") and thumb["w"] == 160 and thumb["h"] == 160, thumb
    icons = d.execute_script("return [...document.querySelectorAll('#listing .type-icon')].map((e) => e.textContent)")
    assert sorted(icons) == ["BIN", "PDF", "TXT"], icons
    shot(d, "10-grid")
    d.find_element(By.CSS_SELECTOR, "[data-view=list]").click()
    wait(d, lambda d: by_id(d, "listing").get_attribute("class") == "list")

    # Cancel: a second large upload is cancelled mid-way; it ends on the server (tus DELETE).
    other = tmp / "other.bin"
    other.write_bytes(os.urandom(90 << 20))
    by_id(d, "files").send_keys(str(other))
    wait(d, lambda d: (u := upload_item(d, "users/dev/other.bin")) and "/s" in u["text"])
    tus_url = d.execute_script("return Object.entries(localStorage).find(([k]) => k.includes(':users/dev/other.bin:'))[1]")
    assert requests.head(tus_url, headers={**auth, "Tus-Resumable": "1.0.0"}).status_code == 200
    d.find_element(By.CSS_SELECTOR, "#uploads li[data-name='users/dev/other.bin'] button[aria-label='cancel other.bin']").click()
    wait(d, lambda d: upload_item(d, "users/dev/other.bin")["state"] == "cancelled")
    wait(d, lambda d: requests.head(tus_url, headers={**auth, "Tus-Resumable": "1.0.0"}).status_code in (404, 410))
    assert d.execute_script("return Object.keys(localStorage).filter((k) => k.includes('other.bin')).length") == 0
    assert requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Fother.bin", headers=auth).status_code == 404

    # Too large for the server (--max-upload-size 100MiB): its refusal is shown on that file.
    huge = tmp / "huge.bin"
    with open(huge, "wb") as f:
        f.truncate(101 << 20)
    by_id(d, "files").send_keys(str(huge))
    wait(d, lambda d: (u := upload_item(d, "users/dev/huge.bin")) and u["state"] == "failed")
    message = d.find_element(By.CSS_SELECTOR, "#uploads li[data-name='users/dev/huge.bin'] .error").text
    assert message.startswith("Could not upload users/dev/huge.bin: ") and message.endswith("(413)."), message
    shot(d, "11-upload-refused-too-large")
    # "Clear finished" empties the list of what is done, cancelled or refused.
    by_id(d, "clear-uploads").click()
    wait(d, lambda d: not d.find_elements(By.CSS_SELECTOR, "#uploads li"))

    # A folder through the directory picker (webkitdirectory): names keep their relative paths.
    album = tmp / "album"
    (album / "sub").mkdir(parents=True)
    (album / "a.txt").write_bytes(b"first\n")
    (album / "sub" / "b.txt").write_bytes(b"second\n")
    by_id(d, "folder").send_keys(str(album))
    wait(d, lambda d: all((u := upload_item(d, f"users/dev/album/{n}")) and u["state"] == "done" for n in ["a.txt", "sub/b.txt"]))
    assert requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Falbum%2Fsub%2Fb.txt?alt=media", headers=auth).content == b"second\n"
    wait(d, lambda d: link(d, "album/"))
    # Drag and drop: a drop event carrying a DataTransfer of files (made in the page: selenium
    # cannot drag from the desktop, so the entries API path for dropped folders is not driven here).
    d.execute_script(
        "const t = new DataTransfer(); t.items.add(new File(['dropped bytes'], 'dropped.txt', {type: 'text/plain'}));"
        "document.getElementById('browser').dispatchEvent(new DragEvent('drop', {dataTransfer: t, bubbles: true, cancelable: true}));")
    wait(d, lambda d: (u := upload_item(d, "users/dev/dropped.txt")) and u["state"] == "done")
    assert requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Fdropped.txt?alt=media", headers=auth).content == b"dropped bytes"

    # Multi-select delete, with a confirmation naming the count.
    for n in ["sel-1.txt", "sel-2.txt", "keep.txt"]:
        assert requests.post(f"{server.url}/v0/b/app/o", params={"name": f"users/dev/{n}"}, data=n.encode(), headers=auth).status_code == 200
    by_id(d, "filter").send_keys("sel-")
    wait(d, lambda d: listed() == ["sel-1.txt", "sel-2.txt"])
    by_id(d, "filter").send_keys(Keys.CONTROL, "a", Keys.DELETE)
    wait(d, lambda d: link(d, "keep.txt"))
    for n in ["sel-1.txt", "sel-2.txt"]:
        click(d, f"#listing input[aria-label='select {n}']")
    wait(d, lambda d: by_id(d, "selection").text == "2 selected")
    by_id(d, "delete-selected").click()
    wait(d, lambda d: by_id(d, "confirm").is_displayed() and "Delete 2 objects?" in by_id(d, "confirm-text").text)
    shot(d, "12-multi-delete-confirm")
    d.find_element(By.CSS_SELECTOR, "#confirm button[value=ok]").click()
    wait(d, lambda d: by_id(d, "notice").text == "Deleted 2 objects.")
    for n, want in [("sel-1.txt", 404), ("sel-2.txt", 404), ("keep.txt", 200)]:
        assert requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2F{n}", headers=auth).status_code == want, n
    wait(d, lambda d: link(d, "sel-1.txt") is None and link(d, "keep.txt"))

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
    # Rotating asks first.
    by_id(d, "rotate").click()
    wait(d, lambda d: by_id(d, "confirm").is_displayed() and "stops working" in by_id(d, "confirm-text").text)
    d.find_element(By.CSS_SELECTOR, "#confirm button[value=ok]").click()
    wait(d, lambda d: by_id(d, "panel-status").text.startswith("Token rotated"))
    assert requests.get(url).status_code == 403
    assert requests.get(by_id(d, "url").get_attribute("value")).content == files["notes.txt"]

    # Rename / move: keep.txt to moved/kept.txt (copy then delete; the dialog says it is not atomic).
    link(d, "keep.txt").click()
    wait(d, lambda d: by_id(d, "panel-title").text == "users/dev/keep.txt")
    before = requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Fkeep.txt", headers=auth).json()
    by_id(d, "rename").click()
    wait(d, lambda d: by_id(d, "rename-dialog").is_displayed())
    assert "Not atomic" in by_id(d, "rename-dialog").text
    by_id(d, "new-name").clear()
    by_id(d, "new-name").send_keys("users/dev/moved/kept.txt")
    shot(d, "13-rename")
    d.find_element(By.CSS_SELECTOR, "#rename-form button[value=ok]").click()
    wait(d, lambda d: by_id(d, "panel-title").text == "users/dev/moved/kept.txt")
    assert requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Fkeep.txt", headers=auth).status_code == 404
    moved = requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Fmoved%2Fkept.txt", headers=auth).json()
    assert moved["sha256"] == before["sha256"]
    wait(d, lambda d: link(d, "moved/") and link(d, "keep.txt") is None)
    # Renaming onto an existing name is refused (the copy never replaces): the message is shown.
    by_id(d, "rename").click()
    by_id(d, "new-name").clear()
    by_id(d, "new-name").send_keys("users/dev/photo.png")
    d.find_element(By.CSS_SELECTOR, "#rename-form button[value=ok]").click()
    wait(d, lambda d: by_id(d, "rename-status").text.startswith("An object named users/dev/photo.png already exists"))
    by_id(d, "new-name").send_keys(Keys.ESCAPE)
    wait(d, lambda d: not by_id(d, "rename-dialog").is_displayed())
    assert requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Fmoved%2Fkept.txt", headers=auth).status_code == 200
    link(d, "notes.txt").click()
    wait(d, lambda d: by_id(d, "panel-title").text == "users/dev/notes.txt")

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
    assert refusal == "The rules do not allow you to upload locked/notes.txt (403).", refusal
    shot(d, "8-refused")

    # Keyboard only: from the filter field, Tab to the first object, Enter opens its panel.
    d.get(server.url + "/console/#bucket=app&prefix=users%2Fdev%2F")
    d.refresh()
    wait(d, lambda d: link(d, "photo.png"))
    by_id(d, "filter").click()
    for _ in range(20):
        ActionChains(d).send_keys(Keys.TAB).perform()  # keys to the page, as a keyboard sends them
        if d.switch_to.active_element.text == "hello.pdf":
            break
    assert d.switch_to.active_element.text == "hello.pdf"
    ActionChains(d).send_keys(Keys.ENTER).perform()
    wait(d, lambda d: by_id(d, "panel").is_displayed() and d.switch_to.active_element.get_attribute("id") == "panel")
    # Escape closes the panel and gives focus back to the object's link.
    ActionChains(d).send_keys(Keys.ESCAPE).perform()
    wait(d, lambda d: not by_id(d, "panel").is_displayed() and d.switch_to.active_element.text == "hello.pdf")
    # Shift+Tab reaches the object's checkbox; Space selects it; Tab back and the view toggles
    # are buttons that Enter and Space press.
    ActionChains(d).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
    assert d.switch_to.active_element.get_attribute("aria-label") == "select hello.pdf"
    ActionChains(d).send_keys(Keys.SPACE).perform()
    wait(d, lambda d: by_id(d, "selection").text == "1 selected")
    ActionChains(d).send_keys(Keys.SPACE).perform()
    wait(d, lambda d: by_id(d, "selection").text == "")
    d.execute_script("document.querySelector('[data-view=grid]').focus()")
    ActionChains(d).send_keys(Keys.SPACE).perform()
    wait(d, lambda d: by_id(d, "listing").get_attribute("class") == "grid")
    ActionChains(d).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
    assert d.switch_to.active_element.get_attribute("data-view") == "list"
    ActionChains(d).send_keys(Keys.ENTER).perform()
    wait(d, lambda d: by_id(d, "listing").get_attribute("class") == "list")
    # Every control has a name a screen reader reads: a label, aria-label or text.
    unnamed = d.execute_script("""
      return [...document.querySelectorAll('button, input, select, textarea, a[href]')].filter((e) => e.offsetParent !== null || e.type === 'file')
        .filter((e) => !(e.getAttribute('aria-label') || e.textContent.trim() || (e.id && document.querySelector(`label[for="${e.id}"]`)) || e.closest('label')))
        .map((e) => e.outerHTML.slice(0, 80))""")
    assert not unnamed, unnamed
    assert d.execute_script("return document.getElementById('listing').getAttribute('role')") == "list"

    # Usable on a 375 px wide phone: nothing wider than the viewport.
    d.set_window_size(375, 800)
    d.execute_script("window.scrollTo(0, 0)")
    wait(d, lambda d: link(d, "photo.png") and d.execute_script("return document.documentElement.scrollWidth") <= 375)
    shot(d, "16-phone-listing")
    # Clicked in the page: the listing is drawn again as the window shrinks (elements go stale).
    wait(d, lambda d: d.execute_script("const a = [...document.querySelectorAll('#listing a')].find((a) => a.textContent === 'photo.png'); if (a) a.click(); return !!a"))
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#preview img"))
    assert d.execute_script("return document.documentElement.scrollWidth") <= 375
    shot(d, "9-phone")

    # No console errors, no CSP violations.
    logs = d.get_log("browser")
    bad = [e for e in logs if e["level"] == "SEVERE" or "Content Security Policy" in e["message"]]
    # The refusals this test provokes (403s, a 412 rename, a 413) are logged by Chromium as failed
    # requests: expected. So is a 423 on the cancelled upload's termination while the server has
    # not yet seen its aborted PATCH close (the console asks again; the test checks it ended).
    bad = [e for e in bad if not ("Failed to load resource" in e["message"] and re.search(r"\b(403|412|413|423)\b", e["message"]))]
    assert not bad, bad



def test_console_large_folder_stays_small_in_the_dom(console):
    """A folder of 3,000 objects: the listing keeps a page or so of entries in the DOM, and
    scrolling loads the next pages until the last object is shown."""
    server, token, d, tmp = console
    auth = {"Authorization": f"Bearer {token}"}
    count = int(os.environ.get("LARDER_CONSOLE_OBJECTS", "3000"))  # 10000 for the issue's folder
    session = requests.Session()
    def put(i):
        r = session.post(f"{server.url}/v0/b/app/o", params={"name": f"users/dev/many/f{i:05d}.txt"}, data=b"%d" % i, headers=auth)
        assert r.status_code == 200, r.text
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(count)))
    d.get(server.url + "/console/#token=" + token + "&bucket=app&prefix=users%2Fdev%2Fmany%2F")
    wait(d, lambda d: "200 objects (scroll for more)" in by_id(d, "status").text)
    assert 0 < entries(d) <= 100, entries(d)
    started = time.monotonic()
    loaded = 200
    while "scroll for more" in by_id(d, "status").text:
        d.execute_script("window.scrollTo(0, document.documentElement.scrollHeight)")
        wait(d, lambda d: (n := int(re.search(r"(\d+) objects", by_id(d, "status").text)[1])) > loaded or "scroll" not in by_id(d, "status").text)
        loaded = int(re.search(r"(\d+) objects", by_id(d, "status").text)[1])
        assert entries(d) <= 100, entries(d)
    assert loaded == count
    d.execute_script("window.scrollTo(0, document.documentElement.scrollHeight)")
    wait(d, lambda d: link(d, f"f{count - 1:05d}.txt"))
    assert entries(d) <= 100
    # Half-way down, then back to the top: the lines drawn are those near the viewport.
    d.execute_script("window.scrollTo(0, document.documentElement.scrollHeight / 2)")
    wait(d, lambda d: link(d, f"f{count // 2:05d}.txt"))
    assert entries(d) <= 100 and link(d, "f00000.txt") is None
    shot(d, "14-large-folder")
    d.execute_script("window.scrollTo(0, 0)")
    wait(d, lambda d: link(d, "f00000.txt"))
    elapsed = time.monotonic() - started
    # How long a jump to another part of the list takes to draw (scroll, then two frames).
    frames = [d.execute_async_script(
        "const done = arguments[arguments.length - 1], t = performance.now();"
        "window.scrollTo(0, document.documentElement.scrollHeight * arguments[0]);"
        "requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t)))", f) for f in (0.1, 0.5, 0.9, 0.3, 0.7, 0)]
    print(f"\nconsole: scroll jumps drawn in {', '.join(f'{ms:.0f}' for ms in frames)} ms")
    assert max(frames) < 1000, frames
    # Keyboard through the virtual list: Tab goes past the lines first drawn (the focused line is
    # scrolled into view, the lines below it are drawn, the focus stays where it is).
    d.execute_script("document.querySelector('#listing a').focus()")
    assert d.switch_to.active_element.text == "f00000.txt"
    for _ in range(2 * 80):  # a checkbox and a link per object
        ActionChains(d).send_keys(Keys.TAB).perform()
    assert d.switch_to.active_element.text == "f00080.txt", d.switch_to.active_element.get_attribute("outerHTML")
    assert entries(d) <= 100
    # Scrolling the focused line far out of view keeps it focused (it stays drawn, with its two
    # neighbours), so the next Tab goes on from it, not from the top of the page.
    d.execute_script("window.scrollTo(0, document.documentElement.scrollHeight)")
    wait(d, lambda d: link(d, f"f{count - 1:05d}.txt"))
    # Read in one script each: the lines are drawn again as the page scrolls (elements go stale).
    focus = lambda d: d.execute_script(
        "const a = document.activeElement; return a.getAttribute('aria-label') || a.textContent")
    assert focus(d) == "f00080.txt"
    assert entries(d) <= 103
    ActionChains(d).send_keys(Keys.TAB).perform()
    wait(d, lambda d: focus(d) == "select f00081.txt")
    ActionChains(d).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
    wait(d, lambda d: focus(d) == "f00080.txt")
    # Filtering by prefix asks the server (one listing), not the DOM.
    by_id(d, "filter").send_keys(f"f{count - 1:05d}"[:-1])
    wait(d, lambda d: "10 objects" in by_id(d, "status").text and entries(d) == 10)
    print(f"\nconsole: {count} objects paged through in {elapsed:.1f} s, at most 100 entries in the DOM")
    bad = [e for e in d.get_log("browser") if e["level"] == "SEVERE" or "Content Security Policy" in e["message"]]
    assert not bad, bad


def test_console_store_view_for_admins_only(console):
    """The Store view reads /admin/v1/store: refused (403, shown) for a user, exact counts for a
    service account's access token (from Larder's /token, as google-auth gets it)."""
    server, token, d, tmp = console
    from google.auth.transport.requests import Request
    from google.oauth2 import service_account
    key_file = tmp / "ops.json"
    subprocess.run([os.environ["LARDER_BIN"], "service-account", "create", "ops", "--data", server.data_dir,
                    "--public-url", server.url, "--output", str(key_file)], check=True, capture_output=True)
    creds = service_account.Credentials.from_service_account_file(
        str(key_file), scopes=["https://www.googleapis.com/auth/devstorage.full_control"])
    creds.refresh(Request())
    admin = {"Authorization": f"Bearer {creds.token}"}
    # Two objects with the same 1000 bytes and one of 500: 2,500 logical bytes, 1,500 stored.
    for name, body in [("a.bin", b"x" * 1000), ("b.bin", b"x" * 1000), ("c.bin", b"y" * 500)]:
        assert requests.post(f"{server.url}/v0/b/app/o", params={"name": f"users/dev/{name}"}, data=body,
                             headers={"Authorization": f"Bearer {token}"}).status_code == 200

    d.get(server.url + "/console/#token=" + token + "&bucket=app&prefix=users%2Fdev%2F")
    wait(d, lambda d: "3 objects" in by_id(d, "status").text)
    # A user is offered no Store button (not a button that answers 403).
    assert not by_id(d, "open-store").is_displayed()
    shot(d, "21-user-no-store")

    d.execute_script("sessionStorage.clear()")
    d.get(server.url + "/console/#token=" + creds.token)
    d.refresh()
    wait(d, lambda d: by_id(d, "browser").is_displayed())
    by_id(d, "open-store").send_keys(Keys.ENTER)
    wait(d, lambda d: "Objects" in by_id(d, "store-facts").text)
    facts = d.execute_script("return Object.fromEntries([...document.querySelectorAll('#store-facts dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent]))")
    assert facts["Objects"] == "3", facts
    assert facts["Logical bytes (sum of object sizes)"] == "2.4 KiB (2500)", facts
    assert facts["Stored bytes (distinct blobs)"] == "1.5 KiB (1500)", facts
    assert facts["Saved by deduplication"] == "1000 B", facts
    assert facts["Blobs"] == "2" and facts["Collectable blobs"] == "0", facts
    assert facts["Last gc"] == "never", facts
    assert d.find_element(By.CSS_SELECTOR, "#store a[href='/metrics']")
    got = requests.get(f"{server.url}/admin/v1/store", headers=admin).json()
    assert (got["objects"], got["logicalBytes"], got["storedBytes"], got["blobs"]) == (3, 2500, 1500, 2)
    # `larder service-account token` prints an access token that is an admin identity too.
    cli = subprocess.run([os.environ["LARDER_BIN"], "service-account", "token", "ops", "--data", server.data_dir],
                         check=True, capture_output=True, text=True).stdout.strip()
    assert requests.get(f"{server.url}/admin/v1/store", headers={"Authorization": f"Bearer {cli}"}).json()["objects"] == 3
    # c.bin deleted: its blob is collectable; `larder gc` frees it and is shown as the last gc.
    assert requests.delete(f"{server.url}/v0/b/app/o/users%2Fdev%2Fc.bin", headers={"Authorization": f"Bearer {token}"}).status_code == 204
    def store_facts():
        by_id(d, "close-store").click()
        by_id(d, "open-store").click()
        wait(d, lambda d: by_id(d, "store-status").text == "" and "Objects" in by_id(d, "store-facts").text)
        return d.execute_script("return Object.fromEntries([...document.querySelectorAll('#store-facts dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent]))")
    facts = store_facts()
    assert (facts["Objects"], facts["Collectable blobs"], facts["Collectable bytes"]) == ("2", "1", "500 B (500)"), facts
    subprocess.run([os.environ["LARDER_BIN"], "gc", "--grace", "0s", "--data", server.data_dir], check=True, capture_output=True)
    facts = store_facts()
    assert facts["Collectable blobs"] == "0" and facts["Blobs"] == "1", facts
    assert re.fullmatch(r".+: 1 blob, 500 B freed", facts["Last gc"]), facts
    # Usage per bucket, beside the totals.
    buckets = d.execute_script("return [...document.querySelectorAll('#store-buckets tbody tr')].map((tr) => [...tr.children].map((c) => c.textContent))")
    assert buckets == [["app", "2", "2.0 KiB (2000)", "100 %"]], buckets
    shot(d, "15-store")
    # Escape closes the Store view and gives the focus back to its button.
    ActionChains(d).send_keys(Keys.ESCAPE).perform()
    wait(d, lambda d: not by_id(d, "store").is_displayed() and d.switch_to.active_element.get_attribute("id") == "open-store")
    logs = d.get_log("browser")
    bad = [e for e in logs if e["level"] == "SEVERE" or "Content Security Policy" in e["message"]]
    bad = [e for e in bad if not ("Failed to load resource" in e["message"] and "403" in e["message"])]
    assert not bad, bad


def test_console_store_view_shows_each_subscriptions_event_backlog(tmp_path):
    """The Store view shows a webhook subscription's pending count, lag and dead letters, from
    /admin/v1/store: one event dead-lettered by a node that gives up after 1 s (its receiver
    refuses), then one left pending by a node started with --event-delivery off."""
    need_browser()
    larder = os.environ["LARDER_BIN"]
    data = str(tmp_path / "data")
    def cli(*args):
        return subprocess.run([larder, *args, "--data", data], check=True, capture_output=True, text=True).stdout
    # Port 1 on the loopback refuses at once.
    sub = re.search(r"^id\t(\S+)$", cli("events", "subscribe", "http://127.0.0.1:1/hook", "--bucket", "app"), re.M).group(1)
    other = re.search(r"^id\t(\S+)$", cli("events", "subscribe", "http://127.0.0.1:1/other", "--bucket", "quiet"), re.M).group(1)
    giving_up = LarderServer(data, extra=["--event-retry-first", "1s", "--event-give-up", "1s"])
    try:
        assert requests.post(f"{giving_up.url}/v0/b/app/o", params={"name": "first.txt"}, data=b"one").status_code == 200
        deadline = time.time() + 60
        while f"{sub}\t" not in cli("events", "dead") and time.time() < deadline:
            time.sleep(0.2)
    finally:
        giving_up.stop()
    assert f"{sub}\t" in cli("events", "dead")
    quiet = LarderServer(data, extra=["--event-delivery", "off"])
    d = chrome()
    try:
        assert requests.post(f"{quiet.url}/v0/b/app/o", params={"name": "second.txt"}, data=b"two").status_code == 200
        cli("service-account", "create", "ops", "--public-url", quiet.url, "--output", str(tmp_path / "ops.json"))
        admin = cli("service-account", "token", "ops").strip()
        time.sleep(2)  # so the pending event's lag is a few seconds
        got = requests.get(f"{quiet.url}/admin/v1/store", headers={"Authorization": f"Bearer {admin}"}).json()
        figures = {e["id"]: e for e in got["eventSubscriptions"]}
        assert set(figures) == {sub, other}, got
        assert (figures[sub]["pending"], figures[sub]["dead"], figures[sub]["bucket"]) == (1, 1, "app"), figures
        assert 2 <= figures[sub]["lagSeconds"] < 120, figures
        assert (figures[other]["pending"], figures[other]["lagSeconds"], figures[other]["dead"]) == (0, 0, 0), figures

        d.get(quiet.url + "/console/#token=" + admin)
        wait(d, lambda d: by_id(d, "browser").is_displayed())
        by_id(d, "open-store").click()
        wait(d, lambda d: by_id(d, "store-status").text == "" and "Objects" in by_id(d, "store-facts").text)
        rows = d.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#store-events tbody tr')].map((tr) =>"
            " [tr.dataset.subscription, {target: tr.querySelector('.sub-target').textContent,"
            " pending: tr.querySelector('.pending').textContent, lag: tr.querySelector('.lag').textContent,"
            " dead: tr.querySelector('.dead').textContent}]))")
        assert rows[sub]["target"] == "app → http://127.0.0.1:1/hook", rows
        assert (rows[sub]["pending"], rows[sub]["dead"]) == ("1", "1"), rows
        assert re.fullmatch(r"\d+ s", rows[sub]["lag"]) and int(rows[sub]["lag"].split()[0]) >= 2, rows
        assert (rows[other]["pending"], rows[other]["lag"], rows[other]["dead"]) == ("0", "—", "0"), rows
        shot(d, "19-store-events")
        bad = [e for e in d.get_log("browser") if e["level"] == "SEVERE" or "Content Security Policy" in e["message"]]
        assert not bad, bad
    finally:
        d.quit()
        quiet.stop()


def test_console_full_disk_refusal_is_shown_on_the_file(console, tmp_path):
    """A data directory on an 8 MiB tmpfs: a 20 MB upload runs out of space and the console shows
    the server's 507 on that file. Needs root (mount); skipped otherwise, and says so."""
    _, _, d, _ = console
    disk = tmp_path / "tiny"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        print(f"\n*** SKIPPED: full-disk console test, cannot mount a tmpfs: {mounted.stderr.strip()} ***")
        pytest.skip("*** full-disk console test SKIPPED: cannot mount a tmpfs (needs root) ***")
    server = None
    try:
        server, token = rules_server(tmp_path / "full.rules", disk / "data")
        big = tmp_path / "too-big-for-the-disk.bin"
        big.write_bytes(os.urandom(20_000_000))
        d.get(server.url + "/console/#token=" + token + "&bucket=app&prefix=users%2Fdev%2F")
        wait(d, lambda d: "0 objects" in by_id(d, "status").text)
        by_id(d, "files").send_keys(str(big))
        wait(d, lambda d: (u := upload_item(d, "users/dev/too-big-for-the-disk.bin")) and u["state"] == "failed", timeout=60)
        message = d.find_element(By.CSS_SELECTOR, "#uploads li[data-name='users/dev/too-big-for-the-disk.bin'] .error").text
        assert message == "Could not upload users/dev/too-big-for-the-disk.bin: no space left on the storage device (507).", message
        shot(d, "17-full-disk")
        bad = [e for e in d.get_log("browser") if e["level"] == "SEVERE" or "Content Security Policy" in e["message"]]
        assert not [e for e in bad if not ("Failed to load resource" in e["message"] and "507" in e["message"])], bad
    finally:
        if server:
            server.stop()
        subprocess.run(["umount", str(disk)], check=False)


def test_console_link_with_another_token_asks_before_switching(console):
    """A `#token=` link opened while someone else is signed in (issue 37): the console shows both
    subjects and keeps the current identity until the user chooses the link's."""
    server, token, d, tmp = console
    mallory = subprocess.run([os.environ["LARDER_BIN"], "token", "--uid", "mallory", "--ttl", "1h", "--data", server.data_dir],
                             capture_output=True, text=True, check=True).stdout.strip()
    d.get(server.url + "/console/#token=" + token + "&bucket=app&prefix=users%2Fdev%2F")
    wait(d, lambda d: by_id(d, "browser").is_displayed())
    stored = lambda: d.execute_script("return sessionStorage.getItem('larder.token')")
    assert stored() == token

    # The link opened in this open tab (a fragment change, no reload) is acted on.
    d.get(server.url + "/console/#token=" + mallory + "&bucket=app&prefix=users%2Fmallory%2F")
    wait(d, lambda d: by_id(d, "switch").is_displayed())
    assert by_id(d, "switch-new").text == "mallory" and by_id(d, "switch-current").text == "dev"
    assert not by_id(d, "browser").is_displayed()
    assert stored() == token, "the link replaced the identity without asking"
    assert "token=" not in d.current_url
    assert d.switch_to.active_element.get_attribute("id") == "switch-keep"
    shot(d, "18-switch-identity")
    by_id(d, "switch-keep").click()
    wait(d, lambda d: by_id(d, "browser").is_displayed())
    assert stored() == token and not by_id(d, "switch").is_displayed()

    # Chosen, the link's identity is taken; the same token again asks nothing.
    d.get(server.url + "/console/#token=" + mallory)
    wait(d, lambda d: by_id(d, "switch").is_displayed())
    by_id(d, "switch-accept").click()
    wait(d, lambda d: by_id(d, "browser").is_displayed())
    assert stored() == mallory
    d.get(server.url + "/console/#token=" + mallory)
    wait(d, lambda d: by_id(d, "browser").is_displayed() and "token=" not in d.current_url)
    assert not by_id(d, "switch").is_displayed()


# ---- issue 34: the first hour without traps --------------------------------------------------

def open_entry(d, text):
    """Clicks the listing's link `text`, found again in one script each try: the virtual
    listing draws its lines again as pages and thumbnails arrive (elements go stale)."""
    wait(d, lambda d: d.execute_script(
        "const a = [...document.querySelectorAll('#listing a')].find((a) => a.textContent === arguments[0]);"
        "if (a) a.click(); return !!a", text))


def signed_token(data_dir, uid, exp):
    """A token of this store signed here with its key (the catalog's token_secret), expiring at
    `exp` (unix time): what `larder token` makes, but already expired or about to."""
    import base64, hmac, json, sqlite3
    db = sqlite3.connect(f"file:{data_dir}/larder.sqlite?mode=ro", uri=True)
    secret = bytes(db.execute("SELECT value FROM settings WHERE key = 'token_secret'").fetchone()[0])
    db.close()
    b64 = lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=")
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps({"sub": uid, "iat": exp - 3600, "exp": exp}).encode())
    return (head + b"." + body + b"." + b64(hmac.new(secret, head + b"." + body, "sha256").digest())).decode()


def put(server, token, name, data):
    # The name percent-encoded by hand: requests would send a space as "+", which is a "+" here.
    r = requests.post(f"{server.url}/v0/b/app/o?name={requests.utils.quote(name, safe='')}", data=data, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text


def bad_logs(d, allowed=r"\b(401|403)\b"):
    logs = d.get_log("browser")
    bad = [e for e in logs if e["level"] == "SEVERE" or "Content Security Policy" in e["message"]]
    return [e for e in bad if not ("Failed to load resource" in e["message"] and re.search(allowed, e["message"]))]


def test_console_sign_in_is_checked_and_a_later_401_returns_to_it(console):
    """A garbage token and an expired one are refused at sign-in, in words; the sign-in page
    says where tokens come from; a token that expires while in use brings sign-in back with the
    reason, and signing in again returns to the same folder."""
    server, token, d, tmp = console
    d.get(server.url + "/console/")
    wait(d, lambda d: by_id(d, "signin").is_displayed())
    page = by_id(d, "signin").text
    for source in ["make serve", "larder token --uid", "larder service-account token"]:
        assert source in page, page
    by_id(d, "token").send_keys("hello, not a token", Keys.ENTER)
    # Enter in a textarea is a newline: the button signs in.
    d.find_element(By.CSS_SELECTOR, "#signin-form button[type=submit]").click()
    wait(d, lambda d: "that is not a token" in by_id(d, "signin-reason").text)
    assert by_id(d, "signin").is_displayed() and not by_id(d, "browser").is_displayed()
    assert d.execute_script("return sessionStorage.getItem('larder.token')") is None

    expired = signed_token(server.data_dir, "dev", int(time.time()) - 7200)
    by_id(d, "token").send_keys(expired)
    d.find_element(By.CSS_SELECTOR, "#signin-form button[type=submit]").click()
    wait(d, lambda d: "this token expired" in by_id(d, "signin-reason").text)
    reason = by_id(d, "signin-reason").text
    assert re.search(r"expired (120 minutes|2 hours) ago", reason), reason
    assert "unix time" not in reason
    shot(d, "1-sign-in")

    # Signed in with a token that is past its expiry within the server's 60 s leeway: it works,
    # then expires while the console is open.
    soon = signed_token(server.data_dir, "dev", int(time.time()) - 52)
    put(server, token, "users/dev/trip/a.txt", b"a")
    d.get(server.url + "/console/#token=" + soon + "&bucket=app&prefix=users%2Fdev%2Ftrip%2F")
    wait(d, lambda d: link(d, "a.txt"))
    time.sleep(10)
    click(d, "#crumbs a:last-of-type")  # any request now: the folder again
    wait(d, lambda d: by_id(d, "signin").is_displayed() and "this token expired" in by_id(d, "signin-reason").text)
    assert "bucket=app&prefix=users%2Fdev%2Ftrip%2F" in d.current_url, d.current_url
    shot(d, "20-signed-out-expired")
    by_id(d, "token").send_keys(token)
    d.find_element(By.CSS_SELECTOR, "#signin-form button[type=submit]").click()
    wait(d, lambda d: link(d, "a.txt") and by_id(d, "crumbs").text == "app / users / dev / trip")
    assert not bad_logs(d)


def test_console_token_link_in_an_open_signed_out_tab_is_used(console):
    server, token, d, tmp = console
    d.get(server.url + "/console/")
    wait(d, lambda d: by_id(d, "signin").is_displayed())
    d.get(server.url + "/console/#token=" + token + "&bucket=app&prefix=users%2Fdev%2F")
    wait(d, lambda d: by_id(d, "browser").is_displayed() and "0 folders, 0 objects" in by_id(d, "status").text)
    assert "token=" not in d.current_url
    assert d.execute_script("return sessionStorage.getItem('larder.token')") == token


def test_console_folders_go_into_history_and_a_refused_one_keeps_the_listing(console):
    """Folder changes are history entries (Back/Forward; the URL names bucket and folder, so a
    reload or a bookmark opens it); a refused folder keeps the last good listing and says which
    operation the rules denied on what; the filter asks once typing pauses."""
    server, token, d, tmp = console
    for name in ["users/dev/album/one.txt", "users/dev/album/two.txt", "users/dev/top.txt"]:
        put(server, token, name, b"x")
    d.get(server.url + "/console/#token=" + token + "&bucket=app&prefix=users%2Fdev%2F")
    wait(d, lambda d: link(d, "album/") and link(d, "top.txt"))
    start_length = d.execute_script("return history.length")
    open_entry(d, "album/")
    wait(d, lambda d: link(d, "one.txt") and by_id(d, "crumbs").text == "app / users / dev / album")
    assert d.current_url.endswith("#bucket=app&prefix=users%2Fdev%2Falbum%2F"), d.current_url
    assert d.execute_script("return history.length") == start_length + 1
    # The first breadcrumb (the bucket's top) is refused by the rules: the album stays.
    d.find_element(By.CSS_SELECTOR, "#crumbs a").click()
    wait(d, lambda d: "The rules do not allow you to list the top of bucket app" in by_id(d, "status").text)
    assert by_id(d, "status").text == ("The rules do not allow you to list the top of bucket app (403). "
                                       "Still showing the folder users/dev/album/ in bucket app.")
    assert by_id(d, "crumbs").text == "app / users / dev / album" and link(d, "one.txt")
    assert d.current_url.endswith("prefix=users%2Fdev%2Falbum%2F")
    shot(d, "22-refused-folder")
    open_entry(d, "two.txt")  # the rows still work
    wait(d, lambda d: by_id(d, "panel-title").text == "users/dev/album/two.txt")
    by_id(d, "close-panel").click()
    # Back: the folder before, in the console; Forward: the album again.
    d.back()
    wait(d, lambda d: link(d, "top.txt") and by_id(d, "crumbs").text == "app / users / dev")
    assert d.current_url.endswith("#bucket=app&prefix=users%2Fdev%2F")
    d.forward()
    wait(d, lambda d: link(d, "one.txt") and by_id(d, "crumbs").text == "app / users / dev / album")
    # The URL is a bookmark: loaded afresh (the tab's token kept), it opens the same folder.
    d.refresh()
    wait(d, lambda d: link(d, "one.txt") and by_id(d, "crumbs").text == "app / users / dev / album")
    # The filter: one listing request after the typing pauses, not one per key.
    d.execute_script("window.listings = 0; const f = window.fetch; window.fetch = (...a) => { if (String(a[0]).includes('/o?')) window.listings++; return f(...a); }")
    by_id(d, "filter").send_keys("tw")
    wait(d, lambda d: d.execute_script("return [...document.querySelectorAll('#listing a')].map((a) => a.textContent)") == ["two.txt"])
    assert d.execute_script("return window.listings") == 1
    assert not bad_logs(d)


def test_console_a_refresh_while_a_folder_loads_does_not_undo_the_move(console):
    """A folder change (here a link followed in the tab: a fragment) whose listing is slow, and a
    refresh meanwhile (the filter typed into): the refresh lists the folder being opened, so the
    move lands. Before, the refresh listed the folder still shown and its answer cancelled the
    move: the URL named the new folder while the old one stayed on screen."""
    server, token, d, tmp = console
    for name in ["users/dev/album/one.txt", "users/dev/top.txt"]:
        put(server, token, name, b"x")
    d.get(server.url + "/console/#token=" + token + "&bucket=app&prefix=users%2Fdev%2F")
    wait(d, lambda d: link(d, "album/") and link(d, "top.txt"))
    # The album's listing answers 800 ms late; every listing is counted.
    d.execute_script("""window.listings = []; const f = window.fetch;
        window.fetch = (...a) => { const u = String(a[0]); if (u.includes('/o?')) window.listings.push(u);
          return u.includes('prefix=users%2Fdev%2Falbum%2F') ? new Promise((ok) => setTimeout(() => ok(f(...a)), 800)) : f(...a); }""")
    d.execute_script("location.hash = 'bucket=app&prefix=users%2Fdev%2Falbum%2F'")
    by_id(d, "filter").send_keys("t")
    wait(d, lambda d: d.execute_script("return window.listings.length") >= 2)
    wait(d, lambda d: link(d, "one.txt") and by_id(d, "crumbs").text == "app / users / dev / album", timeout=10)
    assert d.current_url.endswith("#bucket=app&prefix=users%2Fdev%2Falbum%2F"), d.current_url
    assert by_id(d, "filter").get_attribute("value") == ""
    # Both listings asked for the album; the folder left was not listed again.
    listed = d.execute_script("return window.listings")
    assert len(listed) == 2 and all("prefix=users%2Fdev%2Falbum%2F" in u for u in listed), listed
    assert not bad_logs(d)


def test_console_buckets_listed_and_created(console, tmp_path):
    """A user picks from the buckets the server offers (--console-buckets, default app); an
    admin sees every bucket (GCS buckets.list) and creates one; a bad name is refused in words;
    upload is off until a bucket is chosen."""
    server, token, d, tmp = console
    put(server, token, "users/dev/x.txt", b"x")
    d.get(server.url + "/console/#token=" + token)
    wait(d, lambda d: by_id(d, "browser").is_displayed())
    options = lambda: d.execute_script("return [...document.querySelectorAll('#bucket option')].map((o) => o.value)")
    wait(d, lambda d: options() == ["", "app"])
    assert not by_id(d, "new-bucket").is_displayed()
    # No bucket chosen: uploading and new folders are off, and the page says why.
    assert by_id(d, "files").get_attribute("disabled") is not None and by_id(d, "new-folder").get_attribute("disabled") is not None
    assert by_id(d, "upload-hint").text == "Choose a bucket to upload"
    shot(d, "23-choose-a-bucket")

    # An admin: every bucket, and a new one.
    subprocess.run([os.environ["LARDER_BIN"], "service-account", "create", "ops", "--data", server.data_dir,
                    "--public-url", server.url, "--output", str(tmp / "ops.json")], check=True, capture_output=True)
    admin = subprocess.run([os.environ["LARDER_BIN"], "service-account", "token", "ops", "--data", server.data_dir],
                           check=True, capture_output=True, text=True).stdout.strip()
    assert requests.post(f"{server.url}/v0/b/photos/o", params={"name": "p.txt"}, data=b"p",
                         headers={"Authorization": f"Bearer {admin}"}).status_code == 200
    d.execute_script("sessionStorage.clear()")
    d.get(server.url + "/console/#token=" + admin)
    wait(d, lambda d: options() == ["", "app", "photos"])
    by_id(d, "new-bucket").click()
    by_id(d, "name-input").send_keys("A")
    d.find_element(By.CSS_SELECTOR, "#name-form button[value=ok]").click()
    wait(d, lambda d: "only lower-case letters" in by_id(d, "name-status").text or "shorter than 3" in by_id(d, "name-status").text)
    shot(d, "24-new-bucket-refused")
    by_id(d, "name-input").clear()
    by_id(d, "name-input").send_keys("holiday-2026")
    d.find_element(By.CSS_SELECTOR, "#name-form button[value=ok]").click()
    wait(d, lambda d: not by_id(d, "name-dialog").is_displayed() and by_id(d, "bucket").get_attribute("value") == "holiday-2026")
    wait(d, lambda d: by_id(d, "status").text == "0 folders, 0 objects")
    assert options() == ["", "app", "holiday-2026", "photos"]
    assert by_id(d, "files").get_attribute("disabled") is None
    # Something written there makes it a listed bucket.
    (tmp / "first.txt").write_bytes(b"first")
    by_id(d, "files").send_keys(str(tmp / "first.txt"))
    wait(d, lambda d: link(d, "first.txt"))
    names = [b["name"] for b in requests.get(f"{server.url}/storage/v1/b?project=p", headers={"Authorization": f"Bearer {admin}"}).json()["items"]]
    assert names == ["app", "holiday-2026", "photos"], names
    assert not bad_logs(d, allowed=r"\b400\b")  # the name refused above


def test_console_folder_create_and_recursive_delete_with_a_refused_object(console):
    """A new folder (an empty `name/` object); the folder then deleted with everything under it
    by the server, in batches with progress, each object judged by the rules: the one they
    refuse (*.locked) is listed and stays. Select all selects every entry."""
    server, token, d, tmp = console
    d.get(server.url + "/console/#token=" + token + "&bucket=app&prefix=users%2Fdev%2F")
    wait(d, lambda d: "0 folders, 0 objects" in by_id(d, "status").text)
    by_id(d, "new-folder").click()
    by_id(d, "name-input").send_keys("trip")
    d.find_element(By.CSS_SELECTOR, "#name-form button[value=ok]").click()
    wait(d, lambda d: link(d, "trip/"))
    meta = requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Ftrip%2F", headers={"Authorization": f"Bearer {token}"}).json()
    assert meta["size"] == "0", meta
    # 205 objects in it (three batches of the server's 100), one of them undeletable.
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: put(server, token, f"users/dev/trip/day{i:03d}.txt", b"%d" % i), range(203)))
    put(server, token, "users/dev/trip/deep/photo.locked", b"keep me")
    put(server, token, "users/dev/elsewhere.txt", b"stays")
    d.refresh()
    wait(d, lambda d: link(d, "trip/") and link(d, "elsewhere.txt"))
    # Select all, then only the folder.
    by_id(d, "select-all").click()
    wait(d, lambda d: by_id(d, "selection").text == "2 selected")
    by_id(d, "select-all").click()
    wait(d, lambda d: by_id(d, "selection").text == "")
    click(d, "#listing input[aria-label='select trip/']")
    wait(d, lambda d: by_id(d, "selection").text == "1 selected")
    by_id(d, "delete-selected").click()
    wait(d, lambda d: by_id(d, "confirm").is_displayed())
    assert by_id(d, "confirm-text").text == "Delete 1 folder with everything in it? This cannot be undone."
    # Every progress line, as the page shows them.
    d.execute_script("window.progress = []; new MutationObserver(() => window.progress.push(document.getElementById('deleting-text').textContent))"
                     ".observe(document.getElementById('deleting-text'), {childList: true, characterData: true, subtree: true})")
    d.find_element(By.CSS_SELECTOR, "#confirm button[value=ok]").click()
    wait(d, lambda d: by_id(d, "refused-box").is_displayed(), timeout=60)
    assert by_id(d, "refused").text == "users/dev/trip/deep/photo.locked: the rules do not allow you to delete it", by_id(d, "refused").text
    assert by_id(d, "notice").text == "Deleted 204 objects; 1 refused (listed above)."
    progress = d.execute_script("return window.progress")
    assert [p for p in progress if p] == [f"Deleting trip/: {n} objects deleted…" for n in (0, 100, 200)] + ["Deleting trip/: 204 objects deleted…"], progress
    shot(d, "25-folder-delete-refused")
    listed = requests.get(f"{server.url}/v0/b/app/o", params={"prefix": "users/dev/"}, headers={"Authorization": f"Bearer {token}"}).json()
    assert [i["name"] for i in listed["items"]] == ["users/dev/elsewhere.txt", "users/dev/trip/deep/photo.locked"], listed
    assert not bad_logs(d)


def test_console_download_goes_through_the_browsers_download(tmp_path):
    """Download hands the tokened URL to the browser's own download manager: the file lands in
    Chromium's download directory with the object's name and exact bytes."""
    need_browser()
    server, token = rules_server(tmp_path / "storage.rules", tmp_path / "data")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    d = chrome(downloads)
    try:
        data = os.urandom(3 << 20)
        put(server, token, "users/dev/report.bin", data)
        d.get(server.url + "/console/#token=" + token + "&bucket=app&prefix=users%2Fdev%2F")
        wait(d, lambda d: link(d, "report.bin"))
        open_entry(d, "report.bin")
        wait(d, lambda d: by_id(d, "panel-title").text == "users/dev/report.bin")
        # A binary type has no preview, and says so (not "too large").
        wait(d, lambda d: by_id(d, "preview").text == "No preview for this type (application/octet-stream): download it to open it.")
        # No fetch into the page's memory: the page makes no request for the bytes.
        d.execute_script("window.fetched = []; const f = window.fetch; window.fetch = (...a) => { window.fetched.push(String(a[0])); return f(...a); }")
        by_id(d, "download").click()
        target = downloads / "report.bin"
        wait(d, lambda d: target.exists() and target.stat().st_size == len(data), timeout=60)
        assert target.read_bytes() == data
        assert d.execute_script("return window.fetched") == []
        assert not list(downloads.glob("*.crdownload"))
    finally:
        d.quit()
        server.stop()


def test_console_share_link_expires(console):
    """An admin makes a V4 signed URL (signed in the page with the service account's key file)
    with an expiry chosen; it downloads without a token, then is refused (403) once expired."""
    server, token, d, tmp = console
    key = tmp / "ops.json"
    subprocess.run([os.environ["LARDER_BIN"], "service-account", "create", "ops", "--data", server.data_dir,
                    "--public-url", server.url, "--output", str(key)], check=True, capture_output=True)
    admin = subprocess.run([os.environ["LARDER_BIN"], "service-account", "token", "ops", "--data", server.data_dir],
                           check=True, capture_output=True, text=True).stdout.strip()
    put(server, token, "users/dev/shared notes.txt", b"share me")
    # A user gets no share button.
    d.get(server.url + "/console/#token=" + token + "&bucket=app&prefix=users%2Fdev%2F")
    wait(d, lambda d: link(d, "shared notes.txt"))
    open_entry(d, "shared notes.txt")
    wait(d, lambda d: by_id(d, "panel-title").text == "users/dev/shared notes.txt")
    assert not by_id(d, "share").is_displayed()

    d.execute_script("sessionStorage.clear()")
    d.get(server.url + "/console/#token=" + admin + "&bucket=app&prefix=users%2Fdev%2F")
    wait(d, lambda d: link(d, "shared notes.txt"))
    open_entry(d, "shared notes.txt")
    wait(d, lambda d: by_id(d, "panel-title").text == "users/dev/shared notes.txt")
    by_id(d, "share").click()
    by_id(d, "share-key").send_keys(str(key))
    wait(d, lambda d: "Signing as ops@" in by_id(d, "share-status").text)
    # More than 7 days is refused in the page.
    by_id(d, "share-amount").clear()
    by_id(d, "share-amount").send_keys("8")
    d.find_element(By.CSS_SELECTOR, "#share-form button[value=ok]").click()
    wait(d, lambda d: by_id(d, "share-status").text == "A share link lasts from 1 second to 7 days.")
    shot(d, "26-share-link")
    from selenium.webdriver.support.ui import Select
    by_id(d, "share-amount").clear()
    by_id(d, "share-amount").send_keys("7")
    d.find_element(By.CSS_SELECTOR, "#share-form button[value=ok]").click()
    week = wait(d, lambda d: (u := by_id(d, "url").get_attribute("value")) and "X-Goog-Signature" in u and u)
    assert "X-Goog-Expires=604800" in week
    assert requests.get(week).content == b"share me"
    by_id(d, "share").click()
    by_id(d, "share-amount").clear()
    by_id(d, "share-amount").send_keys("3")
    Select(by_id(d, "share-unit")).select_by_value("1")
    d.find_element(By.CSS_SELECTOR, "#share-form button[value=ok]").click()
    url = wait(d, lambda d: (u := by_id(d, "url").get_attribute("value")) != week and "X-Goog-Expires=3&" in u and u)
    first = requests.get(url)
    assert first.status_code == 200 and first.content == b"share me"
    time.sleep(4.5)
    late = requests.get(url)
    assert late.status_code == 403, late.text
    assert "expired" in late.text
    assert not bad_logs(d)


def test_console_layout_wide_and_phone_and_the_panel_facts(console):
    """At 1,280 px the listing uses the width, and the panel opens beside it; at 375 px the
    breadcrumbs wrap, Sort stays with its menu, the panel opens at its title, long names stay in
    their tiles. The panel's facts follow a metadata save; metadata rows are labelled by key; an
    image shows its dimensions; a 0-byte upload's bar is full; notices clear themselves."""
    server, token, d, tmp = console
    long_name = "a-very-long-file-name-that-would-overflow-its-tile-" * 2 + ".txt"
    put(server, token, "users/dev/photo.png", png(320, 200))
    put(server, token, f"users/dev/deeply/nested/folder/names/here/{long_name}", b"long")
    put(server, token, f"users/dev/{long_name}", b"long")
    d.get(server.url + "/console/#token=" + token + "&bucket=app&prefix=users%2Fdev%2F")
    wait(d, lambda d: link(d, "photo.png"))
    rect = lambda id_: d.execute_script("const r = document.getElementById(arguments[0]).getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, width: r.width}", id_)
    assert rect("browser")["width"] > 1200, rect("browser")
    open_entry(d, "photo.png")
    wait(d, lambda d: "320 × 200 px" in by_id(d, "facts").text)
    browser, panel = rect("browser"), rect("panel")
    assert panel["left"] > browser["right"] and abs(panel["top"] - browser["top"]) < 5, (browser, panel)
    assert browser["width"] + panel["width"] > 1180, (browser, panel)
    shot(d, "27-wide-panel")

    # Metadata: rows labelled by their key; the facts show the new metageneration after a save.
    facts = lambda: d.execute_script("return Object.fromEntries([...document.querySelectorAll('#facts dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent]))")
    assert facts()["Metageneration"] == "1"
    for k, v in [("owner", "ada"), ("camera", "x100")]:
        by_id(d, "meta-add").click()
        d.switch_to.active_element.send_keys(k, Keys.TAB, v)
    labels = d.execute_script("return [...document.querySelectorAll('.meta-row input')].map((i) => i.getAttribute('aria-label'))")
    assert labels == ["key owner", "value of owner", "key camera", "value of camera"], labels
    d.find_element(By.CSS_SELECTOR, "#meta-form button[type=submit]").click()
    wait(d, lambda d: facts()["Metageneration"] == "2")
    server_meta = requests.get(f"{server.url}/v0/b/app/o/users%2Fdev%2Fphoto.png", headers={"Authorization": f"Bearer {token}"}).json()
    assert server_meta["metageneration"] == "2" and server_meta["metadata"] == {"owner": "ada", "camera": "x100"}
    shot(d, "28-metadata-facts")
    # The notice clears itself.
    wait(d, lambda d: by_id(d, "panel-status").text == "Metadata saved.")
    wait(d, lambda d: by_id(d, "panel-status").text == "", timeout=15)

    # A 0-byte upload: its bar is full.
    (tmp / "empty.txt").write_bytes(b"")
    by_id(d, "files").send_keys(str(tmp / "empty.txt"))
    wait(d, lambda d: (u := upload_item(d, "users/dev/empty.txt")) and u["state"] == "done")
    assert d.execute_script("const p = document.querySelector(\"#uploads li[data-name='users/dev/empty.txt'] progress\"); return p.value === p.max && p.max > 0")

    # Long names stay inside their tiles.
    by_id(d, "close-panel").click()
    d.find_element(By.CSS_SELECTOR, "[data-view=grid]").click()
    wait(d, lambda d: link(d, long_name))
    over = d.execute_script("return [...document.querySelectorAll('#listing .tile')].filter((t) => [...t.querySelectorAll('*')].some((c) => c.getBoundingClientRect().right > t.getBoundingClientRect().right + 1)).length")
    assert over == 0
    shot(d, "29-grid-long-names")
    d.find_element(By.CSS_SELECTOR, "[data-view=list]").click()

    # 375 px: no sideways scrolling; breadcrumbs wrap; Sort and its menu on one line.
    # A fresh load of the deep folder's URL (fragment-only moves have their own test, above);
    # users/dev/ holds a file of that long name too, so wait for the deep breadcrumbs.
    d.get("about:blank")
    d.get(server.url + "/console/#bucket=app&prefix=users%2Fdev%2Fdeeply%2Fnested%2Ffolder%2Fnames%2Fhere%2F")
    d.set_window_size(375, 800)
    wait(d, lambda d: by_id(d, "crumbs").text.rstrip("/ ").endswith("here") and link(d, long_name)
         and d.execute_script("return document.documentElement.scrollWidth") <= 375)
    crumbs = rect("crumbs")
    assert crumbs["right"] <= 375 and d.execute_script("return document.getElementById('crumbs').getBoundingClientRect().height") > 30
    sort_label, sort = [d.execute_script("return arguments[0].getBoundingClientRect().top", e) for e in
                        (d.find_element(By.CSS_SELECTOR, "label[for=sort]"), by_id(d, "sort"))]
    assert abs(sort_label - sort) < 12, (sort_label, sort)
    shot(d, "30-phone-breadcrumbs")
    # The panel opens at its title.
    d.get(server.url + "/console/#bucket=app&prefix=users%2Fdev%2F")
    # Clicked in the page: the listing is drawn again as the window shrinks (elements go stale).
    wait(d, lambda d: d.execute_script("const a = [...document.querySelectorAll('#listing a')].find((a) => a.textContent === 'photo.png'); if (a) a.click(); return !!a"))
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#preview img"))
    top = d.execute_script("return document.getElementById('panel-title').getBoundingClientRect().top")
    assert 0 <= top < 120, top
    assert d.execute_script("return document.documentElement.scrollWidth") <= 375
    shot(d, "31-phone-panel")
    assert not bad_logs(d)
