"""Two sanlabs that need the guest image at once build it once.

The second waits for the first and finds its image, instead of building it
again and replacing the image under the first one's booting guests (two
`lab up` in two shells, or the VM tests on two workers).  The build itself
(mmdebstrap, minutes) is stood in for by one that takes a second: what is
tested is the lock around it.
"""

from __future__ import annotations

import threading
import time

from sanlab.emulator import images


def test_a_second_builder_waits_for_the_first_and_reuses_its_image(tmp_path, monkeypatch):
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path))
    builds: list[float] = []

    def build(progress, guest):
        builds.append(time.monotonic())
        time.sleep(0.5)
        folder = images.images_dir() / images.image_key(guest)
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text("{}")
        return images.Image(images.image_key(guest), folder)

    monkeypatch.setattr(images, "_build", build)
    heard: list[str] = []
    found: list[images.Image] = []

    def need_image() -> None:
        found.append(images.build_image(heard.append))

    workers = [threading.Thread(target=need_image) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert len(builds) == 1 and len(found) == 2 and found[0].path == found[1].path
    assert any("waiting for it to finish" in line for line in heard), heard
    assert any("is up to date" in line for line in heard), heard


def test_clean_leaves_the_lock_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path))
    images.images_dir().mkdir(parents=True)
    (images.images_dir() / images.BUILD_LOCK).write_text("")
    assert images.clean_images(everything=True) == []
    assert (images.images_dir() / images.BUILD_LOCK).exists()


def test_each_guest_has_its_own_image_key_and_debian_13_extends_debian_12():
    assert images.image_key("debian-12") != images.image_key("debian-13")
    twelve, thirteen = images.recipe("debian-12"), images.recipe("debian-13")
    assert (twelve["release"], thirteen["release"]) == ("bookworm", "trixie")
    assert (
        "linux-source-6.12" in thirteen["build_packages"] and "linux-source-6.1" in twelve["build_packages"]
    )
    assert set(twelve["packages"]) < set(thirteen["packages"]) and "ktls-utils" in thirteen["packages"]
    assert set(twelve["modules"]) < set(thirteen["modules"]) and "tls" in thirteen["modules"]
