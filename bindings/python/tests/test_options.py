"""Network options come from the library (pcnn_net_option_info): their
names match pcnn.Option and the header, get_option's int-or-float follows
the library's integer-ness, names resolve through the library, and the
ranges it reports are the ones set_option enforces."""
import math
import re

import pytest

import pcnn
from pcnn import _api, _options
from conftest import HEADER


def library_options():
    return _options.describe(_api.current())


def test_the_library_lists_every_option_of_the_header_by_its_name():
    with open(HEADER) as f:
        src = f.read()
    body = re.search(r"typedef enum pcnn_option \{(.*?)\} pcnn_option;", src, re.S)
    text = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
    members = dict(re.findall(r"(PCNN_OPT_\w+)\s*=\s*(\d+)", text))
    # Experimental options hold reserved values, named in section 9.
    for name, reserved in re.findall(r"#define (PCNN_OPT_\w+) (PCNN_OPT_EXPERIMENTAL_\d+)\b", src):
        members[name] = members.pop(reserved)
    header = {int(v): k[len("PCNN_OPT_"):].lower() for k, v in members.items()}
    table = library_options()
    assert [o.value for o in table] == list(range(len(table)))
    assert {o.value: o.name for o in table} == header
    assert [o.name for o in table] == [m.name.lower() for m in pcnn.Option]


def test_a_few_ranges_as_documented():
    info = {o.name: o for o in library_options()}
    assert info["momentum"].min == 0 and info["momentum"].max == math.nextafter(1, 0)
    assert info["learning_rate"].min == math.nextafter(0, 1)
    assert not info["learning_rate"].is_integer
    assert (info["comm_core"].min, info["comm_core"].max) == (-1, 65535)
    assert info["seed"].is_integer and info["seed"].max == 2.0 ** 53
    assert info["overlap"].is_integer and (info["overlap"].min, info["overlap"].max) == (0, 1)


def test_get_option_types_and_set_option_bounds_follow_the_library():
    with pcnn.Net() as net:
        for o in library_options():
            v = net.get_option(o.name)
            assert type(v) is (int if o.is_integer else float), o.name
            if o.name in ("effective_learning_rate", "active_engine"):
                with pytest.raises(pcnn.InvalidStateError, match="read-only"):
                    net.set_option(o.name, v)
                continue
            for bound in (o.min, o.max):
                net.set_option(o.value, bound)
                assert net.get_option(o.value) == bound, o.name
            for outside in (math.nextafter(o.min, -math.inf), math.nextafter(o.max, math.inf)):
                with pytest.raises(pcnn.InvalidArgumentError, match="pcnn_net_set_option"):
                    net.set_option(o.value, outside)
            net.set_option(o.value, v)


def test_names_resolve_through_the_library(monkeypatch):
    lib = _api.current()
    with pcnn.Net() as net:
        net.set_option("Decay-Every-Steps", 7)
        assert net.get_option("decay_every_steps") == 7
        assert net.get_option(pcnn.Option.DECAY_EVERY_STEPS) == 7
        # A name the library reports but the binding's enum lacks (a newer
        # library): resolved by the library's table alone.
        table = list(_options.describe(lib))
        table[7] = table[7]._replace(name="renamed_warmup")
        monkeypatch.setattr(lib, "_options", table)
        net.set_option("renamed_warmup", 5)
        assert net.get_option(pcnn.Option.WARMUP_STEPS) == 5
        with pytest.raises(pcnn.InvalidArgumentError,
                           match=r"Net.get_option: unknown option 'warmup_steps' \(one of: "
                                 r"learning_rate, .*renamed_warmup"):
            net.get_option("warmup_steps")


def test_synchronised_batchnorm_per_network_and_per_layer():
    with pcnn.Net() as net:
        net.set_option("sync_batchnorm", 1)
        x = net.input(1, 4, 4)
        conv = net.conv2d(x, 2, 3, padding=1, bias=False)
        a = net.batchnorm(conv, sync=False)
        b = net.batchnorm(net.relu(a))
        with pytest.raises(pcnn.InvalidArgumentError, match="pcnn_batchnorm_set_sync: layer 1 "
                                                             r"\(conv2d\) is not a batch norm"):
            conv.set_sync(True)
        b.set_sync(None)
        net.set_loss(net.dense(b, 3))
        net.finalize(2)
        # Only b is synchronised (network default); a chose per-rank statistics.
        assert net.summary().count("synchronised across ranks") == 1
        with pytest.raises(pcnn.InvalidStateError, match="finalized"):
            a.set_sync(True)
        assert net.get_option(pcnn.Option.SYNC_BATCHNORM) == 1
