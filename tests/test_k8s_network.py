"""The TCP/RDMA line of a plan's text: what crosses the network between pods or hosts (a P/D service's
KV hand-over over the NIC: NIXL; a multi-node instance: NCCL) runs at the NIC's speed only over RDMA, and
the plan says so in one line, naming --rdma (the same fact the --emit k8s notes state); a hand-over on
one node's NVLink and an instance within one node say nothing of it."""

from __future__ import annotations

from planner.cli import main

PD = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--ttft-ms", "1500",
      "--tpot-ms", "30", "--context-length", "8192", "--serving", "disagg"]
LINE = "runs at the NIC's speed only over RDMA; without an RDMA device {} falls back to TCP (with --emit k8s, " \
       "--rdma RESOURCE=N asks for the cluster's)"


def _text(capsys, *args) -> str:
    code = main(list(args))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_a_pd_plan_over_the_nic_says_nixl_needs_rdma(capsys):
    """80 requests/s outgrow one H100 node (tests/test_disagg_plan.py): the hand-over crosses the
    ConnectX-7, and one line says NIXL reaches that speed only over RDMA; at 5 requests/s both pools sit
    on one node's NVLink and no such line is printed."""
    wide = _text(capsys, *PD, "--requests-per-second", "80")
    assert "over 400 Gb/s" in wide and wide.count(LINE.format("NIXL")) == 1
    assert "network: the hand-over " + LINE.format("NIXL") in wide
    small = _text(capsys, *PD, "--requests-per-second", "5")
    assert "NVLink (one 8-GPU node)" in small and "RDMA" not in small


def test_a_multi_node_plan_says_nccl_needs_rdma(capsys):
    text = _text(capsys, "--model", "llama-3.1-405b", "--chip", "h100", "--concurrency", "16", "--context-length",
                 "32768")
    assert "one instance takes 2 nodes" in text
    assert text.count(LINE.format("NCCL")) == 1
    one_node = _text(capsys, "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8")
    assert "RDMA" not in one_node


def test_a_scenario_service_handed_over_across_nodes_says_it_once(tmp_path, capsys):
    """The chat service of tests/test_disagg_plan.py's SPLIT scenario lands on two nodes beside its batch
    service: one line for it, named by the service."""
    from tests.test_disagg_plan import SPLIT

    path = tmp_path / "split.yaml"
    path.write_text(SPLIT)
    text = _text(capsys, "scenario", str(path))
    assert text.count(LINE.format("NIXL")) == 1
    assert "chat: network: the hand-over " + LINE.format("NIXL") in text
