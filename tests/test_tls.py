"""tests/tls.py: HTTP clients of the run read the system's CA folder, unless told otherwise."""

import os
import ssl

import httpx
import pytest

from tests import tls


def test_the_folder_is_used_where_nothing_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    if not any(tls.SYSTEM_CA_FOLDER.glob("*.0")):
        pytest.skip("this machine has no hashed CA folder")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    tls.use_system_ca_folder()
    assert os.environ["SSL_CERT_DIR"] == str(tls.SYSTEM_CA_FOLDER)
    context = httpx.create_ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    # read lazily: nothing loaded up front, unlike certifi's bundle
    assert context.cert_store_stats()["x509_ca"] == 0


@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_a_choice_already_made_is_kept(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv(variable, "/somewhere/chosen")
    tls.use_system_ca_folder()
    assert {k: v for k, v in os.environ.items() if k.startswith("SSL_CERT_")} == {
        variable: "/somewhere/chosen"
    }


@pytest.mark.parametrize("folder_set_too", [False, True])
def test_the_system_bundle_named_in_ssl_cert_file_gives_way_to_the_folder(
    monkeypatch: pytest.MonkeyPatch, folder_set_too: bool
) -> None:
    """This machine's shells name the system's bundle in ``SSL_CERT_FILE`` (beside the folder
    in ``SSL_CERT_DIR``): the same trust as the folder, but httpx reads the file first and
    loaded it whole into every client's context (15 ms each) rather than lazily."""
    if not any(tls.SYSTEM_CA_FOLDER.glob("*.0")):
        pytest.skip("this machine has no hashed CA folder")
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    if folder_set_too:
        monkeypatch.setenv("SSL_CERT_DIR", str(tls.SYSTEM_CA_FOLDER))
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.SYSTEM_CA_BUNDLE))
    tls.use_system_ca_folder()
    assert {k: v for k, v in os.environ.items() if k.startswith("SSL_CERT_")} == {
        "SSL_CERT_DIR": str(tls.SYSTEM_CA_FOLDER)
    }
    assert httpx.create_ssl_context().cert_store_stats()["x509_ca"] == 0


def test_the_bundle_beside_another_folder_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.SYSTEM_CA_BUNDLE))
    monkeypatch.setenv("SSL_CERT_DIR", "/somewhere/chosen")
    tls.use_system_ca_folder()
    assert {k: v for k, v in os.environ.items() if k.startswith("SSL_CERT_")} == {
        "SSL_CERT_FILE": str(tls.SYSTEM_CA_BUNDLE),
        "SSL_CERT_DIR": "/somewhere/chosen",
    }
