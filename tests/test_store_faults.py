"""Stores that survive faults, and bad input refused before any work (one line, the parameter
named, the value as typed).

Damage is done to a finished store by hand, as a failing disk or a copy cut short would: a chunk
truncated, a byte of a chunk flipped (same size), the manifest garbled or lost. Each is detected
(and named) by ``sweep status`` and by ``load``, and repaired by ``sweep run`` into a store equal
bit for bit to the undamaged one.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from tiny_sweep import assert_same_bits, tiny_sweep

import jaxattn
from jaxattn import engine
from jaxattn.cli import main


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The sweep file and an undamaged store of it (never modified: tests damage copies)."""
    root = tmp_path_factory.mktemp("store")
    f = root / "s.toml"
    f.write_text(tiny_sweep())
    ref = str(root / "ref")
    rep = engine.run_sweep(engine.load_file(str(f)), ref)
    assert len(rep.computed) == 6
    return str(f), ref


def _copy(made, tmp_path) -> str:
    out = str(tmp_path / "store")
    shutil.copytree(made[1], out)
    return out


def _chunk(out, cid):
    return os.path.join(out, "chunks", f"c{cid:06d}.nc")


def test_every_chunk_has_its_checksum_and_an_undamaged_store_verifies(made):
    _, ref = made
    for cid in range(6):
        rec = json.load(open(os.path.join(ref, "chunks", f"c{cid:06d}.sum")))
        assert rec["bytes"] == os.path.getsize(_chunk(ref, cid))
    assert engine.status(ref)["damaged"] == {}
    assert engine.store.damaged(ref) == {}


def test_a_truncated_chunk_is_named_by_status_and_load_and_recomputed_bit_identically(made, tmp_path):
    f, ref = made
    out = _copy(made, tmp_path)
    size = os.path.getsize(_chunk(out, 3))
    with open(_chunk(out, 3), "r+b") as fh:
        fh.truncate(size // 2)

    r = _cli("sweep", "status", out)
    assert r.exit_code == 0, r.output
    assert f"damaged chunk 3: {size // 2} bytes, {size} recorded (cut short or overwritten)" in r.output
    assert "done: 5  pending: 1" in r.output
    with pytest.raises(engine.DamagedStore, match=r"chunk 3 \(chunks/c000003.nc\)") as err:
        jaxattn.load(out)
    assert "\n" not in str(err.value)
    with pytest.warns(UserWarning, match="chunk 3"):
        partial = engine.load_store(out, complete=False)
    assert int(partial["done"].sum()) == 10  # the damaged chunk's two points are not done

    r = _cli("sweep", "run", f, "--out", out, "--no-progress", "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert (got["computed"], got["skipped"], got["damaged"]) == (1, 5, 0)
    assert_same_bits(jaxattn.load(out), jaxattn.load(ref))
    assert os.listdir(os.path.join(out, "chunks", "damaged"))  # the bad file is kept aside


def test_a_flipped_byte_is_found_by_its_checksum_and_verify_recomputes_it(made, tmp_path):
    f, ref = made
    out = _copy(made, tmp_path)
    path = _chunk(out, 1)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF  # same size: only the checksum can tell
    open(path, "wb").write(bytes(data))

    assert engine.status(out)["damaged"] == {1: "checksum mismatch (its content changed after it was written)"}
    # without --verify a run compares sizes only (a stat per chunk): the flip goes unseen
    assert engine.run_sweep(engine.load_file(f), out).computed == ()
    rep = engine.run_sweep(engine.load_file(f), out, verify=True)
    assert rep.computed == (1,)
    assert_same_bits(jaxattn.load(out), jaxattn.load(ref))


def test_a_garbled_manifest_is_one_line_naming_it_and_repair_rebuilds_it(made, tmp_path):
    f, ref = made
    out = _copy(made, tmp_path)
    manifest = os.path.join(out, "manifest.json")
    with open(manifest, "r+b") as fh:
        fh.truncate(100)
    for args in (("sweep", "status", out), ("sweep", "run", f, "--out", out), ("info", out)):
        r = _cli(*args)
        assert r.exit_code == 1, r.output
        line = r.output.strip()
        assert line.startswith(f"Error: {manifest} is damaged: not valid JSON"), line
        assert line.endswith(f"`jaxattn sweep run FILE --out {out} --repair`") and "\n" not in line
    with pytest.raises(engine.DamagedStore, match="manifest.json is damaged"):
        jaxattn.load(out)

    r = _cli("sweep", "run", f, "--out", out, "--repair", "--no-progress", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["computed"] == 0
    new, old = (json.load(open(os.path.join(p, "manifest.json"))) for p in (out, ref))
    assert {k: v for k, v in new.items() if k != "attrs"} == {k: v for k, v in old.items() if k != "attrs"}
    assert_same_bits(jaxattn.load(out), jaxattn.load(ref))


def test_a_lost_manifest_with_a_lost_chunk_is_refused_then_repaired(made, tmp_path):
    f, ref = made
    out = _copy(made, tmp_path)
    os.remove(os.path.join(out, "manifest.json"))
    os.remove(_chunk(out, 4))
    with pytest.raises(engine.DamagedStore, match="manifest.json is missing from a store that has chunks"):
        engine.run_sweep(engine.load_file(f), out)
    rep = engine.run_sweep(engine.load_file(f), out, repair=True)
    assert rep.computed == (4,)
    assert_same_bits(jaxattn.load(out), jaxattn.load(ref))


def test_a_repair_keeps_stored_chunks_cut_at_another_size(made, tmp_path):
    """A store cut at ``--chunk-size 4`` (not the file's 2) repairs to its own plan: the stored
    chunks' size is tried when the file's does not put their points under their ids."""
    f, ref = made
    out = str(tmp_path / "four")
    engine.run_sweep(engine.load_file(f), out, chunk_size=4, max_chunks=2)
    before = json.load(open(os.path.join(out, "manifest.json")))["chunks"]
    open(os.path.join(out, "manifest.json"), "w").write("{}")
    rep = engine.run_sweep(engine.load_file(f), out, repair=True)
    assert json.load(open(os.path.join(out, "manifest.json")))["chunks"] == before
    assert rep.computed == (2,) and rep.skipped == (0, 1)
    assert_same_bits(jaxattn.load(out), jaxattn.load(ref))


def test_a_folder_that_is_no_store_is_one_line_for_status_plot_info_and_load(tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "a.jpg").write_text("x")
    for args in (("sweep", "status", folder), ("sweep", "plot", folder, "--var", "error", "--x", "seed")):
        r = _cli(*args)
        assert r.exit_code == 1 and r.output == f"Error: {folder} is not a sweep store (no manifest.json)\n", r.output
    with pytest.raises(engine.NotAStore, match="is not a sweep store"):
        jaxattn.load(folder)
    bad = tmp_path / "cut.nc"
    bad.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(50))
    with pytest.raises(ValueError, match=f"^{bad} is not a readable netCDF dataset"):
        jaxattn.load(bad)


# --- bad input, refused before any work ---------------------------------------------------------


def test_an_unwritable_out_is_refused_before_training(tmp_path, monkeypatch):
    import jaxattn.slm._cli as slm_cli

    def no_training(*_a, **_k):
        raise AssertionError("training started")

    monkeypatch.setattr(slm_cli, "_train", no_training)
    a_file = tmp_path / "file"
    a_file.write_text("")
    r = _cli("slm", "train", "--out", f"{a_file}/x.nc")
    assert r.exit_code == 2
    assert f"Error: Invalid value for '--out': cannot write {a_file}/x.nc: {a_file} is a file, not a folder" in r.output
    r = _cli("slm", "train", "--figure", tmp_path)
    assert r.exit_code == 2
    assert f"Error: Invalid value for '--figure': cannot write {tmp_path}: {tmp_path} is a folder" in r.output


def test_sweep_run_refuses_a_bad_out_and_chunk_size_before_any_work(made, tmp_path):
    f, _ = made
    a_file = tmp_path / "file"
    a_file.write_text("")
    r = _cli("sweep", "run", f, "--out", f"{a_file}/store")
    assert r.exit_code == 2
    assert f"Error: Invalid value for '--out': {a_file} is a file, not a folder" in r.output

    other = tmp_path / "thesis"
    other.mkdir()
    for name in ("b.tex", "a.tex", "c.bib", "d.pdf"):
        (other / name).write_text("")
    r = _cli("sweep", "run", f, "--out", other)
    assert r.exit_code == 2
    assert (
        f"Error: Invalid value for '--out': {other} is not empty and not a sweep store "
        "(it holds a.tex, b.tex, c.bib, ...); use a new or empty folder" in r.output
    )
    assert sorted(os.listdir(other)) == ["a.tex", "b.tex", "c.bib", "d.pdf"]  # nothing written

    r = _cli("sweep", "run", f, "--out", tmp_path / "new", "--chunk-size", "0")
    assert r.exit_code == 2 and "Invalid value for '--chunk-size': 0 is not in the range x>=1" in r.output
    assert not (tmp_path / "new").exists()
    with pytest.raises(ValueError, match="^chunk_size must be >= 1, got 0$"):
        engine.run_sweep(engine.load_file(f), str(tmp_path / "new"), chunk_size=0)
    with pytest.raises(ValueError, match="^out: .* is not empty and not a sweep store"):
        engine.run_sweep(engine.load_file(f), str(other))


def test_errors_show_values_as_typed_not_as_numpy_reprs():
    from jaxattn.core.checks import plain

    assert plain(np.float64(-5.0)) == "-5.0"
    assert plain([np.int64(3), np.float32(0.5)]) == "[3, 0.5]"
    assert plain(np.array([[1, 2]])) == "[[1, 2]]"
    assert plain("x") == "'x'"
    with pytest.raises(ValueError, match=r"^eta must be > 0, got -5\.0$"):
        jaxattn.slm.train(eta=np.array([0.5, -5.0]))
    with pytest.raises(ValueError, match=r"^H must be >= 1, got 0$"):
        jaxattn.slm.train(H=np.array([0]))
