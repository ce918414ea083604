"""The V8 code cache of the Jest install (runner/code-cache.js): an entry is used only for the very
text it was made from, a forged entry is refused, and the image's cache is made for the heap limits
sandboxes start hosts with.

The module runs in the sandbox image's own Node (cached code is V8-version specific), on a tiny
library in a scratch folder; what it says is the module's own count of hits, refusals and misses.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from harness.sandbox import Limits, image, jest_heap_mb

# Loads lib/answer.js through Node's loader with the cache of /t/cache; `write` makes the entries.
DRIVER = r"""
const cc = require('/opt/etai/code-cache.js');
const mode = process.argv[2];
cc.install('/t/cache', (f) => f.startsWith('/t/lib/'), { write: mode === 'write' });
const out = { value: require('/t/lib/answer.js')() };
if (mode === 'write') out.made = cc.writeAll();
out.stats = cc.stats();
process.stdout.write(JSON.stringify(out));
"""

# What V8 alone would do with an entry made from other text of the same length: it checks the
# length only, and runs the code it was handed.
V8_ALONE = r"""
const vm = require('vm'), fs = require('fs'), Module = require('module');
const [entry, source] = process.argv.slice(2);
const s = new vm.Script(Module.wrap(fs.readFileSync(source, 'utf8')), { cachedData: fs.readFileSync(entry) });
const m = { exports: {} };
s.runInThisContext()(m.exports, require, m, source, '/t/lib');
process.stdout.write(JSON.stringify({ rejected: s.cachedDataRejected, value: m.exports() }));
"""


def _node(img: str, folder, script: str, *args: str, flags: tuple[str, ...] = ()) -> dict:
    (folder / "driver.js").write_text(script)
    r = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--user", "0", "-v", f"{folder}:/t",
         "--entrypoint", "node", img, *flags, "/t/driver.js", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.docker
def test_an_entry_serves_only_its_own_text_and_a_forged_one_is_refused(image, tmp_path):
    (tmp_path / "lib").mkdir()
    answer = tmp_path / "lib" / "answer.js"
    answer.write_text("module.exports = () => 'made';\n")
    made = _node(image, tmp_path, DRIVER, "write")
    assert made["value"] == "made" and made["made"]["entries"] == 1
    folder = tmp_path / "cache" / "default"
    (entry,) = list(folder.iterdir())
    assert _node(image, tmp_path, DRIVER, "read")["stats"] | {"folder": None} == {
        "folder": None, "hits": 1, "rejected": 0, "misses": 0,
    }  # fmt: skip

    # The same length, other text: V8 by itself takes the old entry and runs the old code...
    answer.write_text("module.exports = () => 'news';\n")
    alone = _node(image, tmp_path, V8_ALONE, f"/t/cache/default/{entry.name}", "/t/lib/answer.js")
    assert alone == {"rejected": False, "value": "made"}
    # ...the cache never looks it up, since an entry is named by the whole text.
    read = _node(image, tmp_path, DRIVER, "read")
    assert read["value"] == "news" and (read["stats"]["hits"], read["stats"]["misses"]) == (0, 1)

    # An entry under the right name that V8 did not make is refused, and the module still runs.
    (entry.parent / _name(image, tmp_path)).write_bytes(b"\x00" * 64)
    read = _node(image, tmp_path, DRIVER, "read")
    assert read["value"] == "news" and read["stats"]["rejected"] == 1

    # Under other V8 flags the cache of these flags is not there: no cache, same answer.
    other = _node(image, tmp_path, DRIVER, "read", flags=("--max-old-space-size=300",))
    assert other["value"] == "news" and other["stats"]["folder"] is None


def _name(img: str, folder) -> str:
    """The entry name code-cache.js gives lib/answer.js as it now reads."""
    script = (
        "const cc = require('/opt/etai/code-cache.js'), fs = require('fs'), Module = require('module');"
        "process.stdout.write(JSON.stringify(cc.entryName('node', '/t/lib/answer.js',"
        " Module.wrap(fs.readFileSync('/t/lib/answer.js', 'utf8')))));"
    )
    return _node(img, folder, script)


def test_the_image_makes_the_cache_for_the_heap_limits_sandboxes_use():
    """A host whose flags have no folder starts without the cache: the image must make the folders
    of the default sandbox and of `suite build` / `suite mine` (2048 MB)."""
    dockerfile = (image.RECIPE / "Dockerfile").read_text()
    (line,) = re.findall(r"^RUN node /opt/etai/code-cache-build\.js ([\d ]+)$", dockerfile, re.M)
    heaps = {int(h) for h in line.split()}
    assert {jest_heap_mb(Limits().memory_mb), jest_heap_mb(2048)} <= heaps
