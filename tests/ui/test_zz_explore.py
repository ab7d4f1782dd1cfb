import json
from tests.ui.browser import browser

def test_explore(cockpit):
    d = cockpit
    print("IMPORTERRORS", d.api("GET", "/api/v2/plugins/importErrors").text)
    print("PLUGINS", d.api("GET", "/api/v2/plugins").text[:1500])
    d.wait_for_dags("train_package_deploy", "ui_triggered_training")
    with browser(d) as context:
        page = context.new_page()
        for dag in ("train_package_deploy", "ui_triggered_training"):
            page.goto(d.base_url + f"/dags/{dag}")
            page.wait_for_timeout(3000)
            page.get_by_role("button", name="Trigger").first.click()
            page.wait_for_timeout(3000)
            dialog = page.get_by_role("dialog")
            btns = dialog.get_by_role("button").all()
            print(dag, [(b.inner_text(), b.is_enabled()) for b in btns])
            dialog.screenshot(path=f"/tmp/explore/{dag}-dialog.png")
            page.keyboard.press("Escape")
