"""The one registry: built-ins, entry-point plug-ins (a real distribution on sys.path, found by
importlib.metadata), ``module:Attr`` names, and the owner's error for unknown or broken names."""

from __future__ import annotations

import sys
import textwrap

import pytest

from harness.base.errors import InputError
from harness.base.registry import Registry


@pytest.fixture
def plugin_dist(tmp_path, monkeypatch):
    """A distribution 'etai-widgets' on sys.path declaring entry points in group etai.widgets."""
    (tmp_path / "etai_widgets.py").write_text(
        textwrap.dedent('''
        def gadget():
            """A gadget from a plug-in.

            More text."""
            return "gadget"
        raise_on_load = None
    ''')
    )
    (tmp_path / "etai_widgets_broken.py").write_text("raise RuntimeError('cannot start')\n")
    info = tmp_path / "etai_widgets-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: etai-widgets\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[etai.widgets]\ngadget = etai_widgets:gadget\nbroken = etai_widgets_broken:thing\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for mod in ("etai_widgets", "etai_widgets_broken"):
        sys.modules.pop(mod, None)


def test_builtins_then_plugins_and_their_descriptions(plugin_dist):
    reg: Registry = Registry("widget", group="etai.widgets", where="--widget")
    reg.register("plain", dict, description="a dict")
    assert reg.names() == ("plain", "broken", "gadget")  # built-ins first, plug-ins by name
    assert "etai_widgets" not in sys.modules, "listing names loads no plug-in"
    assert reg.get("gadget")() == "gadget"
    assert reg.about("gadget")["description"] == "A gadget from a plug-in. (plug-in: etai-widgets)"
    assert reg.about("plain") == {"description": "a dict"}
    assert "gadget" in reg and "nothing" not in reg


def test_unknown_and_broken_names_raise_the_owners_error(plugin_dist):
    reg: Registry = Registry("widget", group="etai.widgets", where="--widget")
    with pytest.raises(InputError) as e:
        reg.get("sprocket")
    assert str(e.value) == "--widget: unknown widget 'sprocket'; known: broken, gadget"
    with pytest.raises(
        InputError,
        match=r"widget 'broken' from entry point 'etai_widgets_broken:thing' "
        r"\(group etai.widgets\) failed to load: RuntimeError: cannot start",
    ):
        reg.get("broken")
    with pytest.raises(InputError, match="expected a widget name, got 3"):
        reg.get(3)
    # Without imports=True a module:Attr name is just unknown (the CLI's agent specs use ':').
    with pytest.raises(InputError, match="unknown widget 'collections:OrderedDict'"):
        reg.get("collections:OrderedDict")


def test_module_attr_names_where_allowed_and_a_custom_error():
    class Oops(Exception):
        pass

    reg: Registry = Registry("part", imports=True, error=Oops)
    assert reg.get("collections:OrderedDict").__name__ == "OrderedDict"
    with pytest.raises(Oops, match="module 'collections' has no 'Nope'"):
        reg.get("collections:Nope")
    with pytest.raises(Oops, match="cannot import 'no_such_module_x'"):
        reg.get("no_such_module_x:Y")
    with pytest.raises(Oops, match=r"unknown part 'z'; known: ; or 'module:Class'"):
        reg.get("z")


def test_a_name_registered_twice_is_refused_unless_it_is_the_same_object():
    reg: Registry = Registry("widget")
    reg.register("a", dict)
    reg.register("a", dict)  # a module that registers again on use
    with pytest.raises(ValueError, match="widget 'a' registered twice"):
        reg.register("a", list)

    @reg.register("b", description="decorated")
    def b():
        return 1

    assert reg.get("b") is b and reg.about("b") == {"description": "decorated"}


def test_a_plugin_cannot_replace_a_builtin(plugin_dist):
    reg: Registry = Registry("widget", group="etai.widgets")
    reg.register("gadget", list)
    assert reg.get("gadget") is list and reg.names().count("gadget") == 1


def test_builtin_modules_are_imported_on_first_use_and_optional_ones_may_be_absent(
    tmp_path, monkeypatch
):
    (tmp_path / "etai_reg_builtin.py").write_text(
        "from harness.base.registry import Registry\nREG = Registry('thing', builtins=('etai_reg_builtin',),"
        " optional=('etai_reg_absent_extra',))\nREG.register('one', 1)\n"
    )
    (tmp_path / "etai_reg_buggy.py").write_text("import etai_reg_not_there\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import etai_reg_builtin

    assert etai_reg_builtin.REG.names() == ("one",)
    buggy: Registry = Registry("thing", optional=("etai_reg_buggy",))
    with pytest.raises(
        ImportError, match="etai_reg_not_there"
    ):  # a bug inside a module is not "absent"
        buggy.names()
    for mod in ("etai_reg_builtin", "etai_reg_buggy"):
        sys.modules.pop(mod, None)


def test_threads_that_ask_at_once_all_see_every_builtin(tmp_path, monkeypatch):
    """The first lookups of a run come from its worker threads at once; none may see a half-loaded
    registry (one did: "unknown sandbox 'docker'; known: " while another thread was importing)."""
    import threading

    (tmp_path / "etai_reg_host.py").write_text(
        "from harness.base.registry import Registry\nREG = Registry('thing', builtins=('etai_reg_slow',))\n"
    )
    (tmp_path / "etai_reg_slow.py").write_text(
        "import time\nfrom etai_reg_host import REG\n"
        "time.sleep(0.3)  # a built-in module that takes a while to import\n"
        "REG.register('slow', 1)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from etai_reg_host import REG

    got, errors = [], []

    def ask():
        try:
            got.append(REG.get("slow"))
        except Exception as e:  # noqa: BLE001  collected, asserted below
            errors.append(e)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and got == [1] * 8
    for mod in ("etai_reg_host", "etai_reg_slow"):
        sys.modules.pop(mod, None)
