"""The classification, op by op: the branches the golden cases do not reach."""

from __future__ import annotations

from opscan.compare.cause import Comparison, Walker
from opscan.compare.reader import Header, Op, Rng, Step


def header(**env) -> Header:
    return Header("t", (), "callable", 0, 1, "cuda", "s", 1, {"deterministic": False, **env})


def op(name: str, ins, outs, *, phase="forward", module="m", rng=None, shapes=None, i=0) -> Op:
    shapes = tuple((2,) for _ in ins) if shapes is None else shapes
    return Op(i, name, phase, module, None, "net.py", 7, shapes, tuple(ins), tuple(outs), 1.0, rng, None, 1, (name, module, shapes, None))


def step(*ops: Op, n: int = 0) -> Step:
    return Step(n, list(ops), {}, None, 1)


def walk(a: list[Op], b: list[Op], *, env_diffs=(), **env):
    w = Walker(header(**env), list(env_diffs))
    w.add(step(*a), step(*b))
    return w.result()


def test_an_op_with_no_deterministic_implementation_gets_its_remedy():
    name = "aten.upsample_bicubic2d_backward.default"
    result = walk([op(name, ["x"], ["y"])], [op(name, ["x"], ["z"])])
    cause = result.primary
    assert cause.code == "DET200"
    assert "bicubic" in cause.help and "no deterministic implementation" in cause.help
    assert cause.help_code


def test_cudnn_benchmark_is_named_for_a_convolution():
    name = "aten.convolution_backward.default"
    result = walk([op(name, ["x"], ["y"])], [op(name, ["x"], ["z"])], cudnn_benchmark=True)
    assert "cudnn.benchmark was on" in result.primary.help


def test_with_determinism_on_the_help_says_look_elsewhere():
    result = walk([op("aten.mm.default", ["x"], ["y"])], [op("aten.mm.default", ["x"], ["z"])], deterministic=True)
    assert result.primary.help.startswith("Determinism was on")
    assert result.primary.help_code == ""


def test_a_kernel_difference_past_the_first_forward_mentions_the_environment():
    a = [op("aten.relu.default", ["x"], ["y"]), op("aten.mm.default", ["y"], ["u"], phase="backward")]
    b = [op("aten.relu.default", ["x"], ["y"]), op("aten.mm.default", ["y"], ["v"], phase="backward")]
    result = walk(a, b, env_diffs=["torch"])
    assert result.primary.code == "DET200"
    assert result.primary.message.endswith("the environments differ too (torch)")


def test_uninitialised_memory_is_not_a_difference():
    a = [op("aten.empty.memory_format", [], ["junk1"]), op("aten.fill_.Scalar", ["junk1"], ["z"])]
    b = [op("aten.empty.memory_format", [], ["junk2"]), op("aten.fill_.Scalar", ["junk2"], ["z"])]
    result = walk(a, b)
    assert result.primary is None and result.identical


def test_a_shifted_stream_with_no_recorded_extra_draw_says_so():
    ra, rb = Rng("cuda:0", 0, 16), Rng("cuda:0", 0, 32)
    result = walk([op("aten.native_dropout.default", ["x"], ["y"], rng=ra)], [op("aten.native_dropout.default", ["x"], ["z"], rng=rb)])
    assert result.primary.code == "DET201"
    assert "The Philox offset is 16 ahead in b (a: 16, b: 32)" in result.primary.message
    assert "No recorded op explains it" in result.primary.message


def test_different_seeds_and_cpu_states_are_told_apart():
    seeds = walk([op("aten.bernoulli_.float", ["x"], ["y"], rng=Rng("cuda:0", 0, 0))], [op("aten.bernoulli_.float", ["x"], ["z"], rng=Rng("cuda:0", 1, 0))])
    assert "The generator seeds differ (a: 0, b: 1)" in seeds.primary.message
    states = walk([op("aten.randperm.default", [], ["y"], rng=Rng("cpu", state="aa"))], [op("aten.randperm.default", [], ["z"], rng=Rng("cpu", state="bb"))])
    assert "The generator states differ (a: state aa, b: state bb)" in states.primary.message


def test_a_missing_draw_in_b_is_named():
    ra = Rng("cuda:0", 0, 0)
    a = [op("aten.rand.default", [], ["r"], module=None, rng=ra), op("aten.native_dropout.default", ["x"], ["y"], rng=Rng("cuda:0", 0, 4))]
    b = [op("aten.native_dropout.default", ["x"], ["z"], rng=ra)]
    result = walk(a, b)
    assert result.primary.code == "DET201"
    assert "a draws once where the other run does not, before it: `aten.rand.default` at net.py:7 (step 0)" in result.primary.message
    assert [c.code for c in result.causes] == ["DET201"]  # the missing draw is explained there, not a second finding


def test_an_op_that_reads_another_tensor_is_a_wiring_change():
    a = [op("aten.relu.default", ["x"], ["p"]), op("aten.neg.default", ["x"], ["q"]), op("aten.add.Tensor", ["p", "p"], ["r"])]
    b = [op("aten.relu.default", ["x"], ["p"]), op("aten.neg.default", ["x"], ["q"]), op("aten.add.Tensor", ["p", "q"], ["s"])]
    result = walk(a, b)
    assert result.primary.code == "DET203"
    assert "because the code differs:" in result.primary.message


def test_propagation_is_never_a_cause():
    a = [op("aten.mm.default", ["x"], ["y1"]), op("aten.relu.default", ["y1"], ["z1"]), op("aten.sum.default", ["z1"], ["s1"])]
    b = [op("aten.mm.default", ["x"], ["y2"]), op("aten.relu.default", ["y2"], ["z2"]), op("aten.sum.default", ["z2"], ["s2"])]
    result = walk(a, b)
    assert [c.at.op for c in result.causes] == ["aten.mm.default"]
    assert result.spread[0].ops_differ == 3


def test_independent_root_causes_are_each_reported():
    a = [op("aten.mm.default", ["x"], ["y1"]), op("aten.index_add.default", ["x"], ["w1"], module="emb")]
    b = [op("aten.mm.default", ["x"], ["y2"]), op("aten.index_add.default", ["x"], ["w2"], module="emb")]
    result = walk(a, b)
    assert [c.at.op for c in result.causes] == ["aten.mm.default", "aten.index_add.default"]


def test_the_same_cause_in_later_steps_is_one_finding():
    w = Walker(header(), [])
    for n in range(3):
        w.add(step(op("aten.mm.default", ["x"], ["y"]), n=n), step(op("aten.mm.default", ["x"], [f"z{n}"]), n=n))
    result = w.result()
    (cause,) = result.causes
    assert cause.steps == [0, 1, 2]


def test_unfingerprinted_positions_are_not_evidence():
    result = walk([op("aten.mm.default", ["x", None], ["y", None])], [op("aten.mm.default", ["x", "g"], ["y", "h"])])
    assert result.identical


def test_different_seeds_are_the_environment():
    result = walk(
        [op("aten.native_dropout.default", ["x"], ["y"], rng=Rng("cuda:0", 0, 0))],
        [op("aten.native_dropout.default", ["x"], ["z"], rng=Rng("cuda:0", 1, 0))],
        env_diffs=["seed"],
    )
    assert result.primary.code == "DET204"
    assert result.primary.message.startswith("The records were made with different seeds")


def test_different_seeds_are_the_environment_where_the_batch_parts_first():
    # The batch was drawn from the generator before the first recorded op, at step 1: data, but the seed's doing.
    w = Walker(header(), ["seed"])
    w.add(step(op("aten.relu.default", ["x0"], ["y0"])), step(op("aten.relu.default", ["x0"], ["y0"])))
    w.add(step(op("aten.relu.default", ["x1"], ["y1"]), n=1), step(op("aten.relu.default", ["x2"], ["y2"]), n=1))
    cause = w.result().primary
    assert cause.code == "DET204" and cause.help == "Compare two runs made with the same seed."
    assert cause.message.startswith(
        "The records were made with different seeds (see env_diff), and the runs part at step 1. The data entering the model differs"
    )


def test_a_permutation_drawn_from_another_state_is_the_random_stream_not_the_kernel():
    """`randperm` gives the same values in another order, which the fingerprints cannot see: the gather
    that reads them differs from inputs that look equal, and the cause is the draw, not its kernel."""
    ra, rb = Rng("cpu", state="aa"), Rng("cpu", state="bb")
    a = [
        op("aten.randperm.default", [], ["perm"], rng=ra),
        op("aten.add.Tensor", ["perm"], ["shifted"]),  # the same values again: still maybe in another order
        op("aten.index_select.default", ["x", "shifted"], ["y1"], i=2),
        op("aten.relu.default", ["y1"], ["z1"]),
    ]
    b = [
        op("aten.randperm.default", [], ["perm"], rng=rb),
        op("aten.add.Tensor", ["perm"], ["shifted"]),
        op("aten.index_select.default", ["x", "shifted"], ["y2"], i=2),
        op("aten.relu.default", ["y2"], ["z2"]),
    ]
    result = walk(a, b)
    assert [c.code for c in result.causes] == ["DET201"]
    cause = result.primary
    assert cause.at.op == "aten.randperm.default"
    assert cause.message.startswith(
        "`aten.randperm.default` drew from a different generator state (step 0, forward, module `m`): random stream shift; "
        "its outputs hold the same values in both runs, perhaps in another order, which the fingerprints cannot see, "
        "and `aten.index_select.default` (step 0, forward, module `m` at net.py:7), which reads them, gives different "
        "outputs from inputs that look equal. The generator states differ (a: state aa, b: state bb)."
    ), cause.message


def test_a_kernel_reading_nothing_drawn_is_still_the_kernel():
    """A draw whose state differs but whose outputs look equal explains only the ops that read them."""
    ra, rb = Rng("cpu", state="aa"), Rng("cpu", state="bb")
    a = [op("aten.randperm.default", [], ["perm"], rng=ra), op("aten.mm.default", ["x"], ["y1"])]
    b = [op("aten.randperm.default", [], ["perm"], rng=rb), op("aten.mm.default", ["x"], ["y2"])]
    result = walk(a, b)
    assert [c.code for c in result.causes] == ["DET200"] and result.primary.at.op == "aten.mm.default"


def test_a_generator_seeded_again_with_another_value_is_not_an_extra_draw():
    # Both records say seed 0 (header()), yet the generators' seeds differ: the code re-seeds each run
    # differently. No draw explains that, and "remove the extra draw" would send the user looking for one.
    result = walk(
        [op("aten.normal_.default", ["x"], ["y"], rng=Rng("cuda:0", 11, 0))],
        [op("aten.normal_.default", ["x"], ["z"], rng=Rng("cuda:0", 12, 0))],
    )
    cause = result.primary
    assert cause.code == "DET201"
    assert cause.message == (
        "`aten.normal_.default` drew from a generator seeded differently in each run (step 0, forward, module `m`): "
        "its inputs are equal, its outputs differ. The generator seeds differ (a: 11, b: 12): both runs were seeded "
        "with 0, and then something seeds the generator again with another value in each run (torch.seed(), a seed "
        "from the clock or the process id)"
    )
    assert "extra draw" not in cause.help and cause.help_code == "torch.manual_seed(0)"


def test_a_message_ending_in_a_full_stop_takes_the_later_steps_without_one():
    from opscan.compare.report import finding

    w = Walker(header(), [])
    for n in range(2):
        w.add(
            step(op("aten.normal_.default", ["x"], ["y"], rng=Rng("cpu", state="aa")), n=n),
            step(op("aten.normal_.default", ["x"], [f"z{n}"], rng=Rng("cpu", state=f"b{n}")), n=n),
        )
    message = finding(w.result().primary).message
    assert message.endswith("(a DataLoader iterator, an augmentation, code that was not traced); the same at 1 later step"), message


def _inserted(same_code: bool, **env) -> Comparison:
    """b runs an extra `aten.mul.Tensor` whose output the next op reads: the numbers part because of it."""
    a = [op("aten.relu.default", ["x"], ["y"]), op("aten.mm.default", ["y"], ["z"])]
    b = [op("aten.relu.default", ["x"], ["y"]), op("aten.mul.Tensor", ["y"], ["y2"]), op("aten.mm.default", ["y2"], ["z2"])]
    w = Walker(header(**env), [], header(**env), same_code=same_code)
    w.add(step(*a), step(*b))
    return w.result()


def test_records_of_the_same_code_that_take_another_path_are_not_different_code():
    # opscan diff ran one script twice and the op sequences differ: a set's order (the hash seed) or a branch on
    # something unseeded, never "the two records are of different code".
    cause = _inserted(True, pythonhashseed=None).primary
    assert cause.code == "DET203"
    assert cause.message == (
        "The numbers part because of a structural difference: `aten.mm.default` (step 0, forward, module `m`) reads the "
        "output of `aten.mul.Tensor` (module `m` at net.py:7), an op that only b runs. Both records are of the same code "
        "(opscan diff recorded it twice), so something outside it chose the path: PYTHONHASHSEED is unset in both runs, "
        "so a set of strings iterates in another order in each process (and so does a dict filled from one); or the code "
        "branches on something that changes from run to run (Python's random unseeded, the time, other input)"
    )
    assert cause.help.startswith("Make every run take the same path: iterate over sorted(...) rather than over a set")
    assert "different code" not in cause.help and "random.seed(0)" in cause.help_code


def test_the_hash_seed_is_named_as_the_headers_tell_it():
    fixed = _inserted(True, pythonhashseed="0").primary.message
    assert "PYTHONHASHSEED" not in fixed and fixed.endswith(
        "so something outside it chose the path: the code branches on something that changes from run to run "
        "(Python's random unseeded, the time, other input)"
    )
    unknown = _inserted(True).primary.message  # a record from before the header had the field
    assert "where PYTHONHASHSEED was not set, a set of strings iterates in another order" in unknown
    other = _inserted(False, pythonhashseed=None).primary
    assert "same code" not in other.message and other.help.startswith("The change to the code changes the numbers")


def test_the_same_code_ran_with_other_arguments():
    # Equal inputs, outputs of another shape (read from the op that uses them): structure, and under diff another path.
    a = [op("aten.expand.default", ["one"], ["g4"]), op("aten.t.default", ["g4"], ["t4"], shapes=((4, 4),))]
    b = [op("aten.expand.default", ["one"], ["g2"]), op("aten.t.default", ["g2"], ["t2"], shapes=((2, 2),))]
    w = Walker(header(), [], same_code=True)
    w.add(step(*a), step(*b))
    cause = w.result().primary
    assert cause.code == "DET203" and cause.message.startswith(
        "`aten.expand.default` (step 0, forward, module `m`) gives outputs of another shape from inputs whose fingerprints match "
        "([4, 4] in a, [2, 2] in b): it is called with other arguments (a size, a dim), so the runs took other paths "
        "here, not the kernel; "
    ), cause.message
    assert "Both records are of the same code (opscan diff recorded it twice)" in cause.message


def _with_sources(sources):
    from dataclasses import replace

    return replace(header(), sources=sources)


def test_the_sources_say_same_code_changed_code_or_nothing():
    from opscan.compare import changed_sources

    one = {"train.py": "aa", "net.py": "bb"}
    assert changed_sources(_with_sources(one), _with_sources(dict(one))) == (True, [])
    assert changed_sources(_with_sources(one), _with_sources({**one, "net.py": "cc"})) == (False, ["net.py"])
    # A file only one run loaded (a conditional import) proves neither.
    assert changed_sources(_with_sources(one), _with_sources({**one, "extra.py": "dd"})) == (None, [])
    # An older record, or a target with no project file: no telling.
    assert changed_sources(_with_sources(None), _with_sources(one)) == (None, [])
    assert changed_sources(_with_sources({}), _with_sources({})) == (None, [])
