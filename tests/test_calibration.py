"""The refitted fixed-memory laws against the training records of ../shared/calibration."""

import json
import math
from pathlib import Path

import pytest

from pricing.calibration.fit import bounded_lstsq, fit, overlay
from pricing.calibration.predict import predict, predict_all
from pricing.calibration.records import StartupRecord, load_records
from pricing.calibration.residuals import kv_errors, stats, verdicts
from pricing.kernel import Capacity
from pricing.registry import overlay_from as read_overlay_data
from pricing.registry import read_overlay, shipped
from pricing.units import GiB

TRAINING = Path(__file__).resolve().parents[2] / "shared" / "calibration" / "vllm-startups-train.jsonl"
SPEC = Path(__file__).resolve().parents[1] / "pricing" / "registry" / "overlays" / "spec-reference.yaml"


@pytest.fixture(scope="module")
def records():
    if not TRAINING.exists():
        pytest.skip("../shared/calibration is not present")
    return load_records(TRAINING)


@pytest.fixture(scope="module")
def predictions(records):
    return predict_all(records)


def test_current_era_meets_the_targets(predictions):
    """Releases ≥ 0.19 (whose laws vLLM 0.33 inherits), weights as logged: median |e| ≤ 1.5 %,
    ≥ 80 % within 3 %, mean signed within ±1 %, none optimistic by more than 5 %."""
    errors = [e for p, e in kv_errors(predictions) if p.era.release and p.era.release >= (0, 19)
              and p.weights_source == "logged"]
    s = stats(errors)
    assert s.count >= 20
    assert s.meets_targets, s
    assert s.worst_optimistic <= 0.05


def test_every_era_with_logged_weights_meets_the_targets(predictions):
    """Issue 11's four targets over every era's records with logged weights."""
    errors = [e for p, e in kv_errors(predictions) if p.weights_source == "logged"]
    s = stats(errors)
    assert s.count >= 25 and s.meets_targets, s
    assert s.worst_optimistic <= 0.05  # no record optimistic by more than 5 %


def test_flashinfer_records_take_flashinfers_warm_up(predictions):
    """The vLLM 0.10.1.1 A100 start-ups whose logs print 'Using FlashInfer for top-p & top-k
    sampling' hold 14 bytes a logit in the sampler warm-up (registry
    vllm_eras.laws_until.sampler_bytes_per_logit_flashinfer); their native-path sibling and the
    records that state no path keep the native law."""
    reg = shipped()
    per_hidden = reg.value("cost_model_memory.sampler_hidden_bytes")
    by_id = {p.record.id: p for p in predictions}
    fi = by_id["dennislee22-vllm-7B-2gpuA10080GB-0.5GRAM-same-node"]
    assert fi.sampler == "flashinfer" and "record_logs.yaml" in fi.sampler_known_from
    assert fi.predicted["activation"] == int(256 * 152064 * 14 + 2048 * 3584 * per_hidden)
    native = by_id["dennislee22-vllm-7B-2gpuA10040GB-0.5GRAM-diff-nodes"]
    assert native.sampler == "native" and native.predicted["activation"] == int(256 * 152064 * 38.762
                                                                                + 2048 * 3584 * per_hidden)
    unstated = by_id["llmdbench-v0110-h100-llama-3.1-8b"]
    assert unstated.sampler == "native" and "sampler_path_unstated" in unstated.sampler_known_from
    # every FlashInfer record is within 7 % and none is optimistic (the remaining gap at tp ≥ 2 is
    # non-torch memory: see README, "What the fit cannot explain")
    errors = [fi.error() for fi in predictions if fi.sampler == "flashinfer"]
    assert len(errors) == 4 and all(-0.07 < e < 0 for e in errors)


def test_a_flashinfer_start_up_of_a_release_without_its_law_says_so():
    base = dict(id="x", model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-80GB", tp=1, gpu_memory_utilization=0.9,
                max_model_len=8192, max_num_seqs=256, max_num_batched_tokens=8192, observed={"weights_gib": 14.99},
                vllm_version="0.19.0")
    plain = predict(StartupRecord(**base))
    fi = predict(StartupRecord(**base, sampler="flashinfer"))
    assert fi.predicted["activation"] == plain.predicted["activation"]
    assert "no flashinfer law" in fi.sampler_known_from


def test_the_refit_beats_the_spec_values(records):
    """The spec's registry (6 bytes a logit, no non-torch, flat graphs) is far off on the same records."""
    before = stats([e for p, e in kv_errors(predict_all(records, read_overlay(SPEC))) if p.weights_source == "logged"])
    after = stats([e for p, e in kv_errors(predict_all(records)) if p.weights_source == "logged"])
    assert before.median_abs > 0.015 and after.median_abs < before.median_abs / 3


def test_verdicts_agree_where_weights_are_logged(predictions):
    checked = [(p, ok) for p, ok in verdicts(predictions) if p.weights_source == "logged"]
    assert len(checked) >= 25
    assert all(ok for _, ok in checked), [p.record.id for p, ok in checked if not ok]
    # the v0.10 gpt-oss-120b start-up that ran out of memory is predicted to refuse: its sampler
    # warm-up of that era held ~39 bytes a logit (1024 rows × 201,088 logits ≈ 7.4 GiB)
    [p] = [p for p, _ in checked if p.record.id == "vllm-issue23278-h100-gpt-oss-120b"]
    assert p.starts is False and p.predicted["available_kv"] < 0


def test_sampler_law_by_hand(predictions):
    reg = shipped()
    [p] = [p for p in predictions if p.record.id == "llmd-v0190-meta-llama-llama-3-1-8b---h100-80gb--tp4pp1dp1--8192"]
    per_logit = reg.value("cost_model_memory.sampler_bytes_per_logit")
    per_hidden = reg.value("cost_model_memory.sampler_hidden_bytes")
    assert p.predicted["activation"] == pytest.approx(1024 * 128256 * per_logit + 8192 * 4096 * per_hidden, abs=1)
    # logged: 1.89 GiB of activation peak; the law is within 3 %
    assert abs(p.predicted["activation"] / GiB - 1.89) / 1.89 < 0.03
    # 0.19 does not take the CUDA-graph estimate from the budget: available = requested − the rest
    budget = -(-int(round(79.19 * GiB)) * 95 // 100)
    assert abs(p.predicted["available_kv"] - (budget - p.predicted["weights"] - p.predicted["activation"]
                                              - p.predicted["non_torch"])) <= 1


def test_era_of_a_record_changes_the_graph_term():
    base = dict(id="x", model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-80GB", tp=1, gpu_memory_utilization=0.9,
                max_model_len=8192, max_num_seqs=256, max_num_batched_tokens=8192, observed={"weights_gib": 14.99})
    old = predict(StartupRecord(**base, vllm_version="0.19.0"))
    new = predict(StartupRecord(**base, vllm_version="0.24.1"))
    assert old.era.graph_estimate_in_budget is False and new.era.graph_estimate_in_budget is True
    # 0.24 also takes the newer era's non-torch law (registry vllm_eras.laws_until.non_torch_mid for 0.19)
    gap = new.predicted["cuda_graph"] + new.predicted["non_torch"] - old.predicted["non_torch"]
    assert old.predicted["available_kv"] - new.predicted["available_kv"] == gap and new.predicted["cuda_graph"] > 0


def test_bounded_lstsq_respects_bounds():
    # unconstrained solution x = (2, -1); with x1 ≥ 0 the best is x1 = 0 and x0 refits
    rows = [[1, 1], [1, 2], [1, 3]]
    target = [1, 0, -1]
    x = bounded_lstsq(rows, target, [0, 0], [10, 10])
    assert x[1] == pytest.approx(0) and x[0] == pytest.approx(0)
    free = bounded_lstsq(rows, target, [-10, -10], [10, 10])
    assert free == pytest.approx([2, -1])


def test_fit_recovers_the_shipped_values(predictions):
    """The shipped registry is the fit of these records: refitting gives the same values."""
    fitted = {v.name: v for v in fit(predictions)}
    reg = shipped()
    assert fitted["cost_model_memory.sampler_bytes_per_logit"].value == reg.value(
        "cost_model_memory.sampler_bytes_per_logit")
    assert fitted["cost_model_primitives.non_torch_in_budget"].value == reg.value(
        "cost_model_primitives.non_torch_in_budget")
    for name in ("cost_model_primitives.engine_workspace", "cost_model_primitives.communicator_reservation",
                 "vllm_eras.laws_until.non_torch_mid", "vllm_eras.laws_until.sampler_bytes_per_logit"):
        assert fitted[name].value == reg.value(name), name
    # no FlashInfer record logs its activation peak: that law is derived from vLLM's source, not fitted
    assert "vllm_eras.laws_until.sampler_bytes_per_logit_flashinfer" not in fitted
    from pricing.calibration.fit import margin_value

    refit = predict_all([p.record for p in predictions], read_overlay_data(overlay(list(fitted.values()))))
    assert margin_value(refit).value == reg.value("cost_model_memory.kv_pool_margin")
    law = fitted["cost_model_memory.cuda_graph_laws.llama"]
    assert law.value == reg.value("cost_model_memory.cuda_graph_laws.llama")
    assert "records" in law.source() and "residual rms" in law.how()


def test_overlay_round_trip(tmp_path, predictions):
    import yaml

    values = fit(predictions)
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(overlay(values), sort_keys=False, allow_unicode=True))
    reg = read_overlay(path)
    for v in values:
        assert reg.value(v.name) == v.value and reg[v.name].source == v.source()


def test_overlay_typo_is_named(tmp_path):
    from pricing.errors import InputError

    path = tmp_path / "bad.yaml"
    path.write_text("cost_model_memory:\n  sampler_bytes_per_logt: {value: 3, source: me, how: typo}\n")
    with pytest.raises(InputError, match="sampler_bytes_per_logt is not a registry value"):
        read_overlay(path)


def test_plan_calibrate_writes_an_overlay_every_command_reads(tmp_path, capsys, records):
    from planner.cli import main

    out = tmp_path / "fleet.yaml"
    assert main(["calibrate", str(TRAINING), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cost_model_memory.sampler_bytes_per_logit" in text and "median |error|" in text
    reg = read_overlay(out)
    assert reg["cost_model_memory.sampler_bytes_per_logit"].source.startswith("fitted by plan calibrate on")
    # the overlay applies to other commands, and provenance shows where its values came from
    assert main(["memory", "--registry", str(out), "--model", "llama-3.1-8b", "--chip", "h100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    names = {p["name"]: p for p in report["provenance"]}
    assert names["cost_model_memory.sampler_bytes_per_logit"]["source"].startswith("fitted by plan calibrate")


def test_plan_calibrate_on_logs_that_inform_no_law_exits_2(tmp_path, capsys):
    from planner.cli import main

    log = Path(__file__).parent / "fixtures" / "startup_logs" / "v0.10-issue25350-fp8-kv-100k.log"
    code = main(["calibrate", str(log), "--chip", "h100", "--model", "llama-3.1-8b", "--out", str(tmp_path / "o.yaml")])
    assert code == 2 and not (tmp_path / "o.yaml").exists()


def test_registry_overlay_that_is_not_yaml_is_one_line(tmp_path, capsys):
    from planner.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("cost_model_memory: [unclosed\n")
    assert main(["memory", "--registry", str(bad), "--model", "llama-3.1-8b", "--chip", "h100"]) == 2
    assert "--registry" in capsys.readouterr().err


def test_a_margin_never_holds_more():
    from tests.helpers import kernel

    k = kernel("llama-3.1-8b", "h100", max_model_len=32768)
    held = [Capacity(k).requests_held(m) for m in (0.0, 0.007, 0.05, 0.2, 0.9)]
    assert held == sorted(held, reverse=True) and held[0] == Capacity(k).requests_held() > held[-1]
    # by hand: the blocks kept are floor(num_blocks × (1 − m)), less the null block, per request
    assert Capacity(k).requests_held(0.2) == min(k.engine.max_num_seqs, (int(k.instance.num_blocks() * 0.8) - 1)
                                       // k.blocks_per_request())


def test_each_record_of_0_21_and_later_is_predicted_or_says_why(predictions):
    """Every 0.21+ training record is either in the per-pack table (an error) or named with the
    reason it is not; the report prints one line per record. DeepSeek-V4-Flash on 2 x RTX PRO 6000
    (vLLM 0.25.0, MTP k=2) is predicted with the 0.21 pack and its MTP head, within 3 %."""
    from tests.helpers import script

    report = script("fits/calibration_report")
    later = [p for p in predictions if report.at_least(p.record.vllm_version, (0, 21))]
    in_table = {id(p) for p, _ in kv_errors(predictions)}
    assert len(later) >= 20
    for p in later:
        assert id(p) in in_table or p.skipped or p.record.refused or not p.observed.get("available_kv"), p.record.id
        assert p.skipped is None or len(p.skipped) > len("no model description for this checkpoint")
    printed = report.later_records(predictions)
    assert all(f"`{p.record.id}`" in printed for p in later)
    dsv4 = next(p for p in later if p.record.id == "log-2xrtxpro6000-dsv4-flash-v0250-tp2-mtp2-1m")
    assert dsv4.kernel.release.name == "vllm-0.21" and dsv4.kernel.chip.id == "rtx-pro-6000"
    assert (dsv4.kernel.engine.speculative_method, dsv4.kernel.engine.num_speculative_tokens) == ("mtp", 2)
    assert dsv4.kernel.engine.kv_cache_dtype == "fp8"
    assert abs(dsv4.error()) <= 0.03
    # a drafter the kernel does not model is named, not ignored
    glm = next(p for p in later if p.record.id.startswith("log-3x96gb-glm53"))
    assert glm.skipped


def test_record_gpu_and_cache_texts_are_read_as_the_flags_given():
    """'RTX PRO 6000 Blackwell (96 GB, ...)', 'RTX 5090 (32GB)' and 'RTX 4080 (16376 MiB), WSL2' name
    registry chips by their first words; 'fp8 (-> fp8_ds_mla)' is the flag fp8 (what vLLM turned it
    into is the note)."""
    from pricing.calibration.predict import _deployment, _drafter, chip_for

    assert chip_for("RTX PRO 6000 Blackwell (96 GB, SM120), PCIe without P2P").id == "rtx-pro-6000"
    assert chip_for("RTX 5090 (32GB)").id == "rtx-5090"
    assert chip_for("H100-80GB").id == "h100"
    assert chip_for("RTX 4080 (16376 MiB), WSL2").id == "rtx-4080"
    assert chip_for("Blackwell GPU, not named (a 96GB-class card)") is None
    r = StartupRecord(id="x", model="m", gpu="H20", kv_cache_dtype="fp8 (-> fp8_ds_mla)")
    assert _deployment(r, None).kv_cache_dtype == "fp8"
    assert _drafter({"method": "mtp", "num_speculative_tokens": 2}) == ("mtp", 2)
    assert _drafter({"method": "dflash", "model": "d", "num_speculative_tokens": 7}) is None


def test_the_rtx_4080_start_up_under_wsl2_is_predicted_on_its_logged_total(predictions):
    """cn-notes-rtx4080-qwen2.5-7b-awq-32k (vLLM 0.26.0, WSL2): the chip is the registry's RTX 4080,
    its memory the 15.99 GiB the log's 'Free memory on device' line gives (what vLLM sees under WSL2:
    the driver's whole 16,376 MiB; a Linux host's torch sees 16,049 MiB, the chip file's value).
    By hand from the log: ceil(0.9 x 15.99 GiB) - 5.29 weights - 1.04 peak activation - 0.06
    non-torch = 8.00 GiB, the logged 8.0: the peak activation it logs already holds the CUDA-graph
    estimate taken from the budget (peak_activation_memory = transient_peak_headroom + the applied
    estimate, as vllm-0.33-memory.md §1.4 item 10 reads 0.33; the log's own figures add up only so).
    The kernel's activation peak, CUDA-graph estimate and non-torch memory come to 0.26 GiB more
    than those 1.10 GiB, so it predicts 3.3 % less KV memory."""
    from pricing.chips import get_chip

    p = next(p for p in predictions if p.record.id == "cn-notes-rtx4080-qwen2.5-7b-awq-32k")
    assert get_chip("rtx-4080").memory_bytes == 16049 * 2**20
    assert p.kernel.chip.id == "rtx-4080" and p.kernel.chip.memory_bytes == round(15.99 * GiB)
    assert p.kernel.release.name == "vllm-0.26" and p.weights_source == "logged"
    budget = math.ceil(0.9 * round(15.99 * GiB))
    assert (budget - round((5.29 + 1.04 + 0.06) * GiB)) / GiB == pytest.approx(8.00, abs=0.005)
    fixed = p.predicted["activation"] + p.predicted["cuda_graph"] + p.predicted["non_torch"]
    assert (fixed - round((1.04 + 0.06) * GiB)) / GiB == pytest.approx(0.26, abs=0.01)
    assert p.error() == pytest.approx(-0.0327, abs=0.0005)


def test_a_peak_that_holds_the_graph_estimate_fits_no_sampler_law_unless_the_estimate_is_logged(predictions):
    """From 0.21 the logged peak activation holds the CUDA-graph estimate: the RTX 4080 record (0.26,
    peak 1.04 GiB, no estimate logged) informs no sampler law (taken as the sampler's it would move
    the per-logit law from 15.578 to 15.628 bytes); with an estimate logged, the fit's target is the
    peak less it."""
    from pricing.calibration.fit import _act_logged, _act_target

    fitted = {v.name: v for v in fit(predictions)}
    assert "cn-notes-rtx4080-qwen2.5-7b-awq-32k" not in fitted["cost_model_memory.sampler_bytes_per_logit"].records
    assert fitted["cost_model_memory.sampler_bytes_per_logit"].value == 15.578
    p = next(p for p in predictions if p.record.id == "cn-notes-rtx4080-qwen2.5-7b-awq-32k")
    assert p.era.graph_estimate_in_budget and not _act_logged(p)
    p.observed["cuda_graph"] = round(0.48 * GiB)
    try:
        assert _act_logged(p) and _act_target(p) == round(1.04 * GiB) - round(0.48 * GiB)
    finally:
        p.observed["cuda_graph"] = None


def test_the_qwen3_14b_description_is_its_published_config_by_hand():
    """pricing/calibration/checkpoints/qwen3-14b.yaml (Qwen/Qwen3-14B's published config): 40 layers,
    hidden 5120, 40 query and 8 KV heads of 128, MLP 17408, vocabulary 151936, untied head. By hand,
    bf16: embedding and head 2 x 151936 x 5120, per layer q and o 5120 x 5120 each, k and v
    1024 x 5120 each, gate, up and down 3 x 5120 x 17408, two norms of 5120 and q/k norms of 128,
    the final norm, and the rotary cos/sin cache (40960 positions x 128, bf16); KV 163,840 bytes a
    token (40 layers x K and V x 8 heads x 128 x 2 bytes)."""
    from pricing.calibration.predict import CHECKPOINTS
    from tests.helpers import kernel

    k = kernel(str(CHECKPOINTS / "qwen3-14b.yaml"), "l40s", max_model_len=40960)
    assert (k.model.name, k.model.hf_id, k.model.hidden_size, k.model.vocab_size) == (
        "qwen3-14b", "Qwen/Qwen3-14B", 5120, 151936)
    h, inter, kv = 5120, 17408, 8 * 128
    layer = 2 * h * h + 2 * kv * h + 3 * h * inter + 2 * h + 2 * 128
    assert k.fixed_bytes().weights == 2 * (2 * 151936 * h + 40 * layer + h) + 40960 * 128 * 2 == 29_547_100_160
    [group] = k.layout().groups
    assert len(group.members) == 40 and {m.page_bytes for m in group.members} == {16 * 2 * kv * 2}


def test_the_qwen3_14b_awq_start_ups_are_predicted_where_they_log_their_weights(predictions):
    """jinwoong's Qwen/Qwen3-14B-AWQ on one L40S (vLLM 0.28.0, defaults): the architecture is the
    published Qwen3-14B config's and the AWQ weights are the 9.44 GiB the log gives (the export's
    quantization_config was not found). Its 194,192 tokens are 12,137 blocks of 16 x 40 layers x
    65,536 bytes = 29.63 GiB, the logged KV memory: the description's KV shape is the checkpoint's.
    By hand: ceil(0.92 x 44.52 GiB) - 9.44 - the kernel's activation, non-torch and CUDA-graph
    estimate = 29.89 GiB, +0.87 %. The L4 pipeline-parallel start-up logs no weights: not predicted,
    and the report says why."""
    l40s = next(p for p in predictions if p.record.id == "jinwoong-blog-l40s-qwen3-14b-awq-default")
    assert l40s.kernel.chip.id == "l40s" and l40s.kernel.release.name == "vllm-0.26"
    assert l40s.weights_source == "logged" and l40s.kernel.engine.gpu_memory_utilization == 0.92
    assert round(194_192 // 16 * 40 * 65_536 / GiB, 2) == l40s.record.observed.available_kv_gib == 29.63
    budget = math.ceil(0.92 * l40s.kernel.chip.memory_bytes)
    rest = l40s.predicted["activation"] + l40s.predicted["non_torch"] + l40s.predicted["cuda_graph"]
    assert l40s.predicted["available_kv"] == budget - round(9.44 * GiB) - rest
    assert l40s.error() == pytest.approx(0.0087, abs=0.0005)
    l4 = next(p for p in predictions if p.record.id == "jinwoong-blog-l4-qwen3-14b-awq-pp2")
    assert l4.kernel is None and l4.skipped.startswith("no model description for this checkpoint's weights")
    assert l4.skipped.endswith("this record logs none") and "quantization_config" in l4.skipped
    # asked for every part from the kernel, the logged start-up is not predicted either (its 16-bit
    # weights would be 27.5 GiB, not the AWQ export's)
    assert predict(l40s.record, weights="kernel").skipped.endswith("the kernel's own weights were asked for")


def test_the_club_3090_nvfp4_start_up_is_described_and_held_back_with_its_figure(predictions):
    """club3090-issue652 (vLLM 0.24.0, one RTX 5090): the local folder is nvidia/Qwen3.6-35B-A3B-NVFP4
    (club-3090's compose and profile), described from its published config and hf_quant_config
    (checkpoints/qwen3.6-35b-a3b-nvfp4.yaml). Its decoder is card qwen3.5-35b-a3b's field for field
    (the published file leaves mlp_only_layers at its default, []); the ModelOpt MIXED_PRECISION
    layers give FP8 to the 30 DeltaNet layers' in_proj_qkv + in_proj_z (the graph's fused
    in_proj_qkvz) and out_proj and to the 10 attention layers' q, k, v and o (100 tensors), W4A16
    NVFP4 to the 40 layers' routed and shared experts (160), and leave the vision tower 16-bit. The
    kernel has no term for vLLM's multimodal encoder profile pass, so the record is held back from
    the table with the figure it would give: +5.6 % (6.34 GiB against 6.01)."""
    from collections import Counter

    from pricing.calibration.predict import checkpoint_for, record_models
    from pricing.config import _card, card_index

    p = next(p for p in predictions if p.record.id == "club3090-issue652-rtx5090-qwen3.6-35b-a3b-nvfp4-128k")
    assert p.kernel is None and p.skipped.startswith("the kernel does not model the multimodal encoder's profile")
    entry = record_models()[p.record.model.lower()]
    assert entry["model"] == "checkpoint:qwen3.6-35b-a3b-nvfp4.yaml" and "+5.6 %" in entry["held_back"]
    described = _card(Path(checkpoint_for(p.record.model).name))
    card = _card(card_index()["qwen3.5-35b-a3b"])["config"]["text_config"]
    text = described["config"]["text_config"]
    assert {k: v for k, v in text.items() if k in card} == {k: v for k, v in card.items() if k in text}
    assert set(card) - set(text) == {"mlp_only_layers"} and card["mlp_only_layers"] == []  # the class default
    q = predict(p.record, checkpoint=checkpoint_for(p.record.model))
    assert q.kernel.release.name == "vllm-0.21" and q.kernel.chip.id == "rtx-5090" and q.weights_source == "kernel"
    model = q.kernel.model
    formats = Counter((type(t.fmt).__name__, bool(d["tower"])) for _, d in model.g.nodes(data=True)
                      for t in d["tensors"] if "proj" in t.name or "experts" in t.name)
    assert formats[("Fp8", False)] == 30 * 2 + 10 * 4 and formats[("Nvfp4", False)] == 40 * 4
    assert formats[("Fp8", True)] == formats[("Nvfp4", True)] == 0 and len(model.tower_nodes) == 27 * 2 + 2
    tensors = {t.name: t for _, d in model.g.nodes(data=True) for t in d["tensors"]}
    assert type(tensors["layers.0.linear_attn.in_proj_qkvz"].fmt).__name__ == "Fp8"
    assert q.predicted["weights"] / GiB == pytest.approx(20.94, abs=0.005)
    assert q.predicted["available_kv"] / GiB == pytest.approx(6.34, abs=0.005)
    assert q.error() == pytest.approx(0.0555, abs=0.0005)


def test_plan_calibrate_checks_its_fit_over_the_command_overlay(tmp_path, capsys, records):
    """With --registry, the laws are fitted over the command's registry, and the margin refit and the
    closing check of available KV memory read the fitted values laid over that same registry (they
    read them over the shipped one, the command's overlay silently left out)."""
    from planner.cli import main

    floor = tmp_path / "floor.yaml"  # a 4 GiB activation floor: no law the calibration fits
    floor.write_text("cost_model_memory:\n  activation_floor_bytes: {value: 4294967296, source: test, how: test}\n")
    out = tmp_path / "fitted.yaml"
    assert main(["calibrate", "--registry", str(floor), str(TRAINING), "--out", str(out)]) == 0
    said = capsys.readouterr().out.strip().splitlines()[-1]
    base = read_overlay(floor)
    laid = [e for _, e in kv_errors(predict_all(load_records(TRAINING), read_overlay(out, base)))]
    alone = [e for _, e in kv_errors(predict_all(load_records(TRAINING), read_overlay(out)))]
    s, t = stats(laid), stats(alone)
    assert said == (f"available KV memory with the overlay: {s.count} records, median |error| {s.median_abs:.2%}, "
                    f"{s.within_3:.0%} within 3 %, mean {s.mean_signed:+.2%}")
    assert (s.median_abs, s.within_3) != (t.median_abs, t.within_3)
