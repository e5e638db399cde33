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
from test_cli_outputs import FORMATS
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
    assert (
        f"damaged chunk 3: {size // 2} bytes, {size} recorded (cut short or overwritten) "
        "(`jaxattn sweep run --verify` recomputes it)" in r.output
    )
    assert "done: 5  pending: 1" in r.output
    with pytest.raises(engine.DamagedStore, match=r"chunk 3 \(chunks/c000003.nc\)") as err:
        jaxattn.load(out)
    assert "\n" not in str(err.value)
    with pytest.warns(UserWarning) as caught:
        partial = engine.load_store(out, complete=False)
    assert [type(w.message) for w in caught] == [UserWarning, engine.store.IncompleteStore]
    assert "chunk 3 (chunks/c000003.nc)" in str(caught[0].message)
    assert str(caught[1].message).startswith(f"{out}: 2 of 12 points not finished")
    assert int(partial["done"].sum()) == 10  # the damaged chunk's two points are not done

    r = _cli("sweep", "run", f, "--out", out, "--no-progress", "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert (got["computed"], got["skipped"], got["damaged"]) == (1, 5, "unchecked")  # sizes only
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
    # without --verify a run compares sizes only (a stat per chunk): the flip goes unseen, and the
    # summary says the checksums were not read rather than "damaged: 0"
    assert engine.run_sweep(engine.load_file(f), out).computed == ()
    r = _cli("sweep", "run", f, "--out", out, "--no-progress", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["damaged"] == "unchecked"
    r = _cli("sweep", "run", f, "--out", out, "--no-progress", "--json", "--verify")
    assert r.exit_code == 0, r.output
    assert (json.loads(r.output)["computed"], json.loads(r.output)["damaged"]) == (1, 0)
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


# --- nothing computed and then lost, nothing silent -------------------------------------------


def test_sweep_plot_checks_its_figure_before_any_work_and_writes_into_plots(made, tmp_path, monkeypatch):
    _, ref = made
    out = _copy(made, tmp_path)

    def no_load(*_a, **_k):
        raise AssertionError("the store was loaded")

    with monkeypatch.context() as m:
        m.setattr(engine, "load_store", no_load)
        for fig, why in (
            ("/proc/x.png",
             "cannot write /proc/x.png: a file cannot be created in the folder /proc (No such file or directory)"),
            (tmp_path / "x.foo", f"cannot write a figure as {tmp_path / 'x.foo'}: unknown format '.foo' (formats: "
             f"{FORMATS})"),
            (tmp_path / "x", f"cannot write a figure as {tmp_path / 'x'}: no extension names its format (formats: "
             f"{FORMATS})"),
        ):
            r = _cli("sweep", "plot", out, "--var", "error", "--x", "seed", "--out", fig)
            assert r.exit_code == 2, r.output
            assert r.output.splitlines()[-1] == f"Error: Invalid value for '--out': {why}", r.output
    fig = tmp_path / "new" / "folder" / "e.pdf"  # a missing folder is created
    r = _cli("sweep", "plot", out, "--var", "error", "--x", "seed", "--out", fig)
    assert r.exit_code == 0 and r.output == f"{fig}\n", r.output
    assert fig.read_bytes().startswith(b"%PDF")
    r = _cli("sweep", "plot", out, "--var", "error", "--x", "seed")
    assert r.exit_code == 0 and r.output == f"{os.path.join(out, 'plots', 'error.png')}\n", r.output
    assert sorted(os.listdir(out)) == ["chunks", "claims", "log.jsonl", "manifest.json", "plots", "sweep.toml"]


def test_a_plot_and_a_load_of_an_incomplete_store_say_how_many_points_are_missing(made, tmp_path):
    out = _copy(made, tmp_path)
    os.remove(_chunk(out, 2))
    r = CliRunner().invoke(main, ["sweep", "plot", out, "--var", "error", "--x", "seed"])
    assert r.exit_code == 0, r.output
    assert r.stderr == (
        f"Warning: 2 of 12 points of {out} are not finished (pending, failed or damaged chunks); the figure "
        "shows the 10 that are\n"
    )
    with pytest.warns(engine.store.IncompleteStore) as caught:
        ds = engine.load_store(out, complete=False)
    assert [str(w.message) for w in caught] == [
        f"{out}: 2 of 12 points not finished (pending, failed or damaged chunks): NaN there, done = False"
    ]
    assert int(ds["done"].sum()) == 10


def test_a_repair_is_not_blocked_by_the_figures_the_tool_wrote(made, tmp_path):
    f, ref = made
    out = _copy(made, tmp_path)
    assert _cli("sweep", "plot", out, "--var", "error", "--x", "seed").exit_code == 0  # into plots/
    with open(os.path.join(out, "error.png"), "wb") as fh:  # where an older version wrote it
        fh.write(b"\x89PNG")
    os.remove(os.path.join(out, "manifest.json"))
    r = _cli("sweep", "run", f, "--out", out, "--repair", "--no-progress", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["computed"] == 0
    assert_same_bits(jaxattn.load(out), jaxattn.load(ref))
    # a folder of figures and nothing of a store is still not a store
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "a.png").write_bytes(b"\x89PNG")
    r = _cli("sweep", "run", f, "--out", photos)
    assert r.exit_code == 2 and f"{photos} is not empty and not a sweep store (it holds a.png)" in r.output


def _unwritable_folder(path) -> str:
    """A folder where no file can be created, even by root: a read-only one (mode 555) for other
    users, a link to a folder of /proc for root (which passes every mode test)."""
    from jaxattn.core.checks import unwritable

    if os.geteuid() != 0:
        os.makedirs(path)
        os.chmod(path, 0o555)
    else:
        os.symlink("/proc/self/fdinfo", path)
    why = unwritable(str(path), folder=True)
    if why is None:
        pytest.skip("no folder here refuses a file")
    return why


def test_a_store_folder_that_refuses_files_is_found_before_a_chunk_is_computed(made, tmp_path, monkeypatch):
    from jaxattn.engine import _sweep

    f, _ = made
    out = tmp_path / "store"
    out.mkdir()
    why = _unwritable_folder(out / "chunks")
    monkeypatch.setattr(_sweep, "compute_chunk", lambda *a, **k: pytest.fail("a chunk was computed"))
    r = _cli("sweep", "run", f, "--out", out, "--no-progress")
    assert r.exit_code == 2 and r.output.splitlines()[-1] == f"Error: Invalid value for '--out': {why}", r.output
    with pytest.raises(ValueError, match="^out: a file cannot be created in the folder "):
        engine.run_sweep(engine.load_file(f), str(out))


def test_failed_chunks_end_the_run_with_one_line_saying_so(made, tmp_path, monkeypatch):
    from jaxattn.engine import _sweep

    f, _ = made

    def boom(*_a, **_k):
        raise RuntimeError("no memory left\nsecond line")

    monkeypatch.setattr(_sweep, "compute_chunk", boom)
    out = tmp_path / "store"
    r = CliRunner().invoke(main, ["sweep", "run", f, "--out", str(out), "--no-progress", "--json"])
    assert r.exit_code == 1
    assert json.loads(r.stdout)["failed"] == 6
    assert r.stderr == (
        f"Error: 6 chunks of {out} failed (chunk 0: RuntimeError: no memory left); `jaxattn sweep status {out}` lists "
        "them, a rerun retries them\n"
    )


def test_status_estimates_the_time_left_from_the_chunks_own_times(made, tmp_path):
    out = _copy(made, tmp_path)
    log = [e for e in engine.store.read_log(out) if e.get("event") != "computed"]
    t = log[-1]["time"]
    with open(os.path.join(out, "log.jsonl"), "w") as fh:
        for cid, seconds in enumerate((7.0, 1.0, 1.0, 1.0, 1.0, 1.0)):  # the first one compiled
            fh.write(json.dumps({"time": t + cid, "host": "h", "pid": 1, "event": "computed", "chunk": cid,
                                 "seconds": seconds}) + "\n")
    for cid in (2, 3, 4, 5):  # as after a SIGKILL: four chunks lost, no worker running
        os.remove(_chunk(out, cid))
    st = engine.status(out)
    assert (st["seconds_per_chunk"], st["seconds_left"], st["running"]) == (2.0, 8.0, 0)
    r = _cli("sweep", "status", out)
    assert "time left: about 8 s (4 chunks at 2 s each, for one worker; none is running)\n" in r.output, r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "10000000000"], "--workers must be <= the sweep's {n} chunks (a worker computes whole chunks), "
         "got 10000000000"),
        (["--time", "-5"], "Invalid value for --time: must be >= 1, got -5"),
        (["--mem-gb", "nan"], "Invalid value for --mem-gb: must be finite and > 0, got nan"),
        (["--cpus-per-task", "0"], "Invalid value for --cpus-per-task: must be >= 1, got 0"),
        (["--gpus-per-node", "-1"], "Invalid value for --gpus-per-node: must be >= 0, got -1"),
    ],
)
def test_submit_refuses_its_options_by_name_before_any_job(made, tmp_path, args, message):
    """More workers than chunks (10^10 of them once built a list of 10^10 arguments), a negative
    time (a submitit traceback after the plan) and the other job sizes."""
    pytest.importorskip("submitit")
    f, ref = made
    r = _cli("sweep", "submit", f, "--out", tmp_path / "a", "--executor", "local", "--no-wait", *args)
    assert r.exit_code == 2, r.output
    with open(os.path.join(ref, "manifest.json")) as fh:
        n = len(json.load(fh)["chunks"])
    assert r.output.strip().splitlines()[-1] == "Error: " + message.format(n=n), r.output
    assert not (tmp_path / "a" / "submitit").exists()  # no job started


def test_a_missing_slurm_is_one_line(made, tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    f, _ = made
    monkeypatch.setenv("PATH", str(tmp_path))  # neither sbatch nor srun
    r = _cli("sweep", "submit", f, "--out", tmp_path / "a", "--executor", "slurm")
    assert r.exit_code == 1
    assert r.output == (
        "Error: executor 'slurm' needs SLURM's sbatch and srun; sbatch and srun are not on the PATH (run it where "
        "SLURM is, or use --executor local for processes of this machine)\n"
    )
    assert not (tmp_path / "a").exists()
    (tmp_path / "sbatch").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "sbatch").chmod(0o755)
    r = _cli("sweep", "submit", f, "--out", tmp_path / "a", "--executor", "slurm")
    assert r.exit_code == 1 and "; srun is not on the PATH (run it where SLURM is" in r.output.splitlines()[0]
    assert len(r.output.splitlines()) == 1 and not (tmp_path / "a").exists()
    # SLURM's commands present, but sbatch refuses (no cluster configured): its lines, as one
    for name in ("sbatch", "srun"):
        tool = tmp_path / name
        tool.write_text("#!/bin/sh\necho 'sbatch: error: fetch_config: DNS SRV lookup failed' >&2\n"
                        "echo 'sbatch: fatal: Could not establish a configuration source' >&2\nexit 1\n")
        tool.chmod(0o755)
    r = _cli("sweep", "submit", f, "--out", tmp_path / "b", "--executor", "slurm")
    assert r.exit_code == 1
    assert r.output == (
        "Error: sbatch refused the job array: sbatch: error: fetch_config: DNS SRV lookup failed; sbatch: fatal: Could "
        "not establish a configuration source (the plan "
        f"is in {tmp_path / 'b'}; nothing was computed)\n"
    )
