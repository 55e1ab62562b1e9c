"""`--emit k8s -o DIR` on `plan` and `plan scenario`: the plan's pools as Kubernetes manifests
(planner/report/k8s.py), one file per pool; DIR replaced whole or not at all, one run at a time
(planner/report/atomic.py)."""

from __future__ import annotations

from dataclasses import dataclass

import click

from planner.commands.flags import own_flag
from pricing.errors import InputError, render


def k8s_options() -> list:
    from planner import defaults
    from planner.commands.ranges import Bounded  # a UID: non-root, within Kubernetes' runAsUser range [0, 2^31 - 1]

    return [
        click.option("--emit", type=click.Choice(["k8s"]), help="also write the plan as Kubernetes manifests (-o DIR)"),
        click.option("-o", "--output", "output_dir", metavar="DIR|FILE", help="the folder --emit writes, replaced "
                     "whole (created; files in it from before do not stay beside the new ones); with --format html, "
                     "the page's .html file"),
        click.option("--image", help="the vLLM image of every pod (default "
                     f"{defaults.value('kubernetes.image')}, planner/defaults.yaml)"),
        click.option("--model-source", help="what the pods serve: a Hugging Face id or a path inside the pod "
                     "(default: the model as the plan names it)"),
        click.option("--hf-token-secret", metavar="SECRET", help="a Secret holding the Hugging Face token under key "
                     "`token`: the pods read HF_TOKEN from it (never written into a manifest)"),
        click.option("--model-cache-claim", metavar="PVC", help="a PersistentVolumeClaim for the model cache "
                     "(default: an emptyDir per pod)"),
        click.option("--model-cache-size", type=click.Choice(["auto"]), help="auto: also write the "
                     "--model-cache-claim PersistentVolumeClaim, sized for the checkpoints served"),
        click.option("--namespace", help="the namespace of every resource (default: none, kubectl's own)"),
        click.option("--node-selector", multiple=True, metavar="KEY=VALUE", help="the pods' node selector "
                     "(repeat), instead of the GPU's label from the chip registry (nvidia.com/gpu.product, "
                     "amd.com/gpu.device-id); `none`: any node with the GPU resource"),
        click.option("--router-image", metavar="IMAGE", help="a disaggregated service's router image: vLLM's "
                     "proxy at /opt/vllm-router/toy_proxy_server.py (docs/launch.md gives the Dockerfile)"),
        click.option("--router-fetch", metavar="SHA256", help="opt in to downloading vLLM's proxy when the router "
                     "pod starts, run only if its SHA-256 is this (instead of --router-image)"),
        click.option("--router-script", metavar="URL", help="with --router-fetch: where the proxy is downloaded "
                     "from (default: vLLM v0.33.0's toy_proxy_server.py on GitHub, planner/defaults.yaml)"),
        click.option("--rdma", multiple=True, metavar="RESOURCE=N", help="the RDMA device P/D and multi-node pods "
                     "ask for (repeat), as the cluster's device plugin names it (rdma/rdma_shared_device_a=1, "
                     "nvidia.com/hostdev=1); adds IPC_LOCK and UCX's NIXL setting. Without it NIXL and NCCL use TCP"),
        click.option("--toleration", multiple=True, metavar="KEY[=VALUE]:EFFECT", help="a taint the vLLM pods "
                     "tolerate (repeat; default: nvidia.com/gpu:NoSchedule on NVIDIA chips); `none`: no toleration"),
        click.option("--run-as-user", type=Bounded(int, 1, 2**31 - 1), metavar="UID", help="run the pods as this "
                     "non-root user (an image that has one; the default vllm/vllm-openai runs as root)"),
        click.option("--k8s-target", type=click.Choice(["plain", "llm-d", "dynamo"]), default="plain",
                     show_default=True, help="llm-d: an InferencePool and llm-d's scheduler per pool or P/D service "
                     "(its pools labelled by role, the decode pods' routing sidecar); dynamo: a DynamoGraphDeployment "
                     "per service (needs --image: Dynamo's vLLM runtime)"),
    ]


def apply_k8s_options(f):
    for option in reversed(k8s_options()):
        f = option(f)
    return f


def autoscaler_options() -> list:
    """`plan scenario`'s autoscaler of every pool its traffic schedules (planner/report/autoscaler.py)."""
    from planner import defaults

    return [click.option("--autoscaler", type=click.Choice(["hpa", "keda"]), help="with --emit: each pool a "
                         "service's traffic: schedules gets a HorizontalPodAutoscaler (hpa, the default) or a KEDA "
                         "ScaledObject (keda)"),
            click.option("--prometheus-address", metavar="URL", help="with --autoscaler keda: the Prometheus its "
                         f"triggers query (default {defaults.value('autoscaler.prometheus_address')})")]


@dataclass(frozen=True)
class PdService:
    """A disaggregated service as `emit` takes it: its router's and its two pools' names, and the
    plan's hand-over between them (planner/app/serving.py Handover): over one node's NVLink, the
    manifests keep both pools' pods on one node."""

    router: str
    prefill: str
    decode: str
    handover: object  # Handover

    @property
    def one_node(self) -> bool:
        return self.handover.one_node


@dataclass(frozen=True)
class Emit:
    """`--emit k8s -o DIR`, read once from the command's options: what the manifests are built with
    (planner/report/k8s.py K8sOptions) and the folder they go to."""

    k8s: object  # K8sOptions
    output_dir: str
    autoscaler: str = "hpa"  # an autoscaled pool's autoscaler: hpa | keda (planner/report/autoscaler.py)
    prometheus: str | None = None  # --prometheus-address: the Prometheus KEDA's triggers query


def emit_of(options: dict) -> Emit | None:
    """Before any planning: -o with --emit, and --emit with -o, a folder it can write, the node
    selector well formed; the settings read once (None without --emit)."""
    if options.get("emit") and not options.get("output_dir"):
        raise InputError("--emit", "needs the folder to write", "add -o DIR")
    if options.get("fmt") == "html":  # -o names the page (planner/commands/plan.py html_output)
        return None
    if options.get("output_dir") and not options.get("emit"):
        raise InputError("-o", "has nothing to write", "add --emit k8s for a folder of manifests, or --format html "
                         "for a page")
    if not options.get("emit"):
        return None
    from planner import defaults
    from planner.report import k8s

    k8s.writable_folder(options["output_dir"])
    if options.get("k8s_target") == "dynamo" and not options.get("image"):
        raise InputError("--image", "the Dynamo target runs Dynamo's vLLM runtime image, which has no default here",
                         "give --image nvcr.io/nvidia/ai-dynamo/vllm-runtime:TAG, a tag whose vLLM is 0.33")
    selector = k8s.node_selector(tuple(options.get("node_selector") or ()))
    made = defaults.load()  # the command's planner defaults (the one loader: kept by the shipped registry)
    return Emit(k8s.checked(k8s.K8sOptions(image=options.get("image") or k8s.default_image(made), defaults=made,
                               model_source=options.get("model_source"), hf_token_secret=options.get("hf_token_secret"),
                               model_cache_claim=options.get("model_cache_claim"), namespace=options.get("namespace"),
                               target=options.get("k8s_target") or "plain", node_selector=selector,
                               router_script=options.get("router_script"),
                               rdma=k8s.rdma(tuple(options.get("rdma") or ())),
                               tolerations=k8s.tolerations(tuple(options.get("toleration") or ())),
                               run_as_user=options.get("run_as_user"),
                               model_cache_size=options.get("model_cache_size"),
                               router_image=options.get("router_image"),
                               router_fetch=k8s.router_fetch(options.get("router_fetch")))),
                options["output_dir"], options.get("autoscaler") or "hpa", options.get("prometheus_address"))


def check_serving(to: Emit | None, services: list[tuple[str, str]]) -> None:
    """Before any planning: a disaggregated service's router on the plain target needs --router-image
    or --router-fetch (llm-d's scheduler and Dynamo's frontend route on their own) ((name, serving)
    pairs; `auto` is known only once planned, and refused then, before anything is written)."""
    if to is None:
        return
    from planner.kinds import Serving
    from planner.report.k8s import no_router_image

    for name, serving in services:
        if serving == Serving.DISAGG and to.k8s.target == "plain" and not (to.k8s.router_image
                                                                           or to.k8s.router_fetch):
            raise no_router_image(f"{name} router")


def check_chips(to: Emit | None, chips) -> None:
    """Before any planning: every chip the manifests may name has its node label's value, or
    --node-selector gives the selector (planner/report/k8s.py `unlabelled`)."""
    if to is None or to.k8s.node_selector is not None:
        return
    from planner.report.k8s import unlabelled
    from pricing.chips import get_chip

    for chip_id in dict.fromkeys(chips):
        problem = unlabelled(get_chip(chip_id))
        if problem is not None:
            raise problem


def emit(pools: list[tuple[str, object]], routers: list[PdService] = (), *, to: Emit,
         autoscaled: dict | None = None) -> list[str]:
    """Write each (name, pool) as `<name>.yaml`, and each disaggregated service's router (`routers`:
    its PdService) as `<name>.yaml`; the paths written and the notes, as lines. A role pool's name is
    `<service> <role>` (its file `<service>-<role>.yaml`); a service handed over on one node has its
    two pools' pods bound to one node, whichever target (planner/report/k8s.py `one_node`).
    `autoscaled`: a pool's name -> its planner/report/autoscaler.py Autoscaling (its autoscaler follows)."""
    import json

    from planner.report import k8s
    from pricing.chips import get_chip
    from pricing.errors import mention

    names = [name for name, _ in pools] + [r.router for r in routers]
    named = k8s.resource_names(names)
    files, notes = {}, []
    models = ({pool.model: k8s.checkpoint_bytes(pool) for _, pool in pools}  # every pool's, whichever target
              if to.k8s.model_cache_size == "auto" else {})
    by_name = dict(pools)
    notes += [k8s.one_node_note(r.router.removesuffix(" router"), by_name[r.prefill].gpus + by_name[r.decode].gpus,
                               to.k8s)
              for r in routers if r.one_node]
    if to.k8s.target == "dynamo":  # one DynamoGraphDeployment per service: its frontend routes
        services = [(r.router.removesuffix(" router"), [("prefill", by_name[r.prefill]),
                                                        ("decode", by_name[r.decode])], r.one_node)
                    for r in routers]
        paired = {r.prefill for r in routers} | {r.decode for r in routers}
        services += [(name, [("worker", pool)], False) for name, pool in pools if name not in paired]
        pools, routers = [], []
        if autoscaled:
            notes.append(f"{', '.join(autoscaled)}: no autoscaler: a DynamoGraphDeployment is scaled by Dynamo's "
                         "own planner")
        for name, workers, together in services:
            resources, said = k8s.dynamo_manifests(name, workers, get_chip, to.k8s, together)
            files[f"{k8s._name(name)}.yaml"] = resources
            notes += said
    if to.k8s.target == "llm-d":  # a P/D service's pools with llm-d's roles, its scheduler in the router's file
        for r in routers:
            more, said = k8s.llm_d_pd_manifests(r.router.removesuffix(" router"),
                                                [(r.prefill, by_name[r.prefill]), (r.decode, by_name[r.decode])],
                                                r.router, get_chip, to.k8s, named, r.one_node)
            files |= more
            notes += said
        pools = [(name, pool) for name, pool in pools if name not in {x for r in routers for x in (r.prefill,
                                                                                                    r.decode)}]
        routers = []
    together = {name: (r.prefill, r.decode) for r in routers if r.one_node for name in (r.prefill, r.decode)}
    for name, pool in pools:
        resources, said = k8s.pool_manifests(name, pool, get_chip(pool.chip), to.k8s,
                                             together=together.get(name, ()))
        if name in (autoscaled or {}):
            from planner.report.autoscaler import autoscaler

            resources, more = autoscaler(resources, autoscaled[name], to.autoscaler, to.prometheus,
                                         defaults=to.k8s.defaults)
            said += more
        files[f"{named[name]}.yaml"] = resources
        notes += said
    for r in routers:
        resources, said = k8s.router_manifests(r.router, r.prefill, r.decode, to.k8s)
        files[f"{named[r.router]}.yaml"] = resources
        notes += said
    if to.k8s.model_cache_size == "auto":
        files[f"{k8s._name(to.k8s.model_cache_claim)}.yaml"] = [k8s.cache_claim(models, to.k8s)]
    if to.k8s.rdma and not any(key in json.dumps(files) for key, _ in to.k8s.rdma):
        notes.append(f"{mention('rdma')}: no pool of this plan is disaggregated or spans nodes, so no pod asks for "
                     "the RDMA device")
    written = k8s.write(files, to.output_dir)
    return [f"wrote {p} ({', '.join(r['kind'] for r in files[p.name])})" for p in written] + [
        f"{'' if n.startswith('warning:') else 'note: '}{render(n, own_flag)}"  # a field a note mentions as the
        for n in grouped(notes, names)]  # running command's flag


def grouped(notes: list[str], names: list[str]) -> list[str]:
    """The notes, one line for what several pools are told alike ("NAME: text" for each): the pools
    named once (a 500-service review's gated-model warning is one line, not 500), in order."""
    longest_first = sorted(names, key=len, reverse=True)
    said: dict[tuple[str, str], list[str]] = {}
    for note in notes:
        lead = "warning: " if note.startswith("warning: ") else ""
        body = note.removeprefix(lead)
        name = next((n for n in longest_first if body.startswith(f"{n}: ")), "")
        said.setdefault((lead, body[len(name) + 2:] if name else body), []).append(name)
    out = []
    for (lead, text), who in said.items():
        pools = [n for n in who if n]
        if not pools:
            out.append(lead + text)
            continue
        shown = ", ".join(pools[:3]) + (f" and {len(pools) - 3} more" if len(pools) > 3 else "")
        out.append(f"{lead}{shown}: {text}")
    return out


def disaggregated(name: str, plan) -> tuple[list[tuple[str, object]], list[PdService]]:
    """A disaggregated plan's (planner/app/serving.py DisaggPlan) two pools and its router, as `emit`
    takes them."""
    return _pd(name, plan.prefill, plan.decode, plan.handover)


def _pd(name: str, prefill, decode, handover) -> tuple[list[tuple[str, object]], list[PdService]]:
    p, d = f"{name} prefill", f"{name} decode"
    return [(p, prefill), (d, decode)], [PdService(f"{name} router", p, d, handover)]


def fleet_pools(services: list) -> tuple[list[tuple[str, object]], list[PdService]]:
    """A scenario's pools as `emit` takes them: aggregated ones by service, a disaggregated
    service's two role pools (each knows the service it serves and its role) and its router."""
    from planner.kinds import Role

    pools, routers = [], []
    for s in services:
        if s.role == Role.AGGREGATED:
            pools.append((s.service, s))
        elif s.role == Role.DECODE:
            prefill = next(p for p in services if (p.served, p.role) == (s.served, Role.PREFILL))
            more, router = _pd(s.served, prefill, s, s.handover)
            pools += more
            routers += router
    return pools, routers
