"""labs.export: the clabernetes manifests a lab exports to, validated against clabernetes'
Topology CRD and containerlab's schema (tests/data/schemas; no cluster here)."""
from __future__ import annotations

import re

import pytest
import yaml

from rocelab.labs import export, sonic, topology
from rocelab.labs.errors import LabError
from tests.schemas import topology_cr_problems

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def manifests(spec="roce-v2-leafspine", connectivity="vxlan"
              ) -> tuple[topology.Topology, list[dict]]:
    """The lab's manifests, the Topology checked against the upstream schemas first."""
    topo = topology.load(spec)
    docs = export.clabernetes_manifests(topo, "1.2.3", connectivity)
    assert topology_cr_problems(docs[-1]) == []
    return topo, docs


def definition(docs: list[dict]) -> dict:
    return yaml.safe_load(docs[-1]["spec"]["definition"]["containerlab"])


@pytest.mark.parametrize("lab", sorted(p.name for p in (topology.resolve("roce-v2-leafspine")
                                                        .parent.parent.iterdir())
                                       if (p / f"{p.name}.clab.yml").is_file()))
def test_every_shipped_lab_exports_to_valid_manifests(lab):
    _, docs = manifests(lab)
    assert [d["kind"] for d in docs][-1] == "Topology"


def test_schema_check_catches_what_clabernetes_would_refuse():
    _, docs = manifests()
    resource = docs[-1]
    bad = {**resource, "spec": {**resource["spec"], "conectivity": "vxlan"}}
    assert topology_cr_problems(bad) == [
        "spec: Additional properties are not allowed ('conectivity' was unexpected)"]
    files = resource["spec"]["deployment"]["filesFromConfigMap"]
    bad = {**resource, "spec": {**resource["spec"], "deployment": {"filesFromConfigMap": {
        node: [{"filePath": f["filePath"]} for f in entries] for node, entries in files.items()}}}}
    assert "'configMapName' is a required property" in topology_cr_problems(bad)[0]
    text = resource["spec"]["definition"]["containerlab"].replace("kind: linux", "kind: lnx", 1)
    bad = {**resource, "spec": {**resource["spec"], "definition": {"containerlab": text}}}
    assert topology_cr_problems(bad)[0].startswith("spec.definition.containerlab: topology.")


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def test_one_topology_and_a_configmap_per_switch_config():
    topo, docs = manifests()
    assert [d["kind"] for d in docs] == ["ConfigMap"] * 4 + ["Topology"]  # maps exist first
    resource = docs[-1]
    assert resource["apiVersion"] == "clabernetes.containerlab.dev/v1alpha1"
    assert resource["metadata"] == {"name": "roce-v2-leafspine"}
    for cm in by_kind(docs, "ConfigMap"):
        assert cm["apiVersion"] == "v1"
        assert DNS_LABEL.match(cm["metadata"]["name"])
        assert all(CONFIGMAP_KEY.match(k) for k in cm["data"])
    names = sorted(cm["metadata"]["name"] for cm in by_kind(docs, "ConfigMap"))
    assert names == [f"roce-v2-leafspine-configs-{s}-config-db-json"
                     for s in ("leaf1", "leaf2", "spine1", "spine2")]


def test_definition_is_the_lab_as_containerlab_would_run_it():
    topo, docs = manifests()
    text = docs[-1]["spec"]["definition"]["containerlab"]
    assert text.startswith("# roce-v2-leafspine.clab.yml, exported by rocelab 1.2.3")
    doc = yaml.safe_load(text)
    assert doc["name"] == topo.name
    assert list(doc["topology"]["nodes"]) == list(topo.nodes)
    assert doc["topology"]["links"] == yaml.safe_load(topo.path.read_text())["topology"]["links"]
    h1 = doc["topology"]["nodes"]["h1"]
    mtu = next(link.mtu for link in topo.links if "h1" in (link.a.node, link.b.node))
    assert h1["exec"] == [f"ip link set dev eth1 mtu {mtu}",  # clabernetes drops link mtu:
                          "ethtool -K eth1 tx off tso off gso off gro off",
                          *topo.nodes["h1"].exec]
    leaf1 = doc["topology"]["nodes"]["leaf1"]
    assert leaf1["kind"] == "sonic-vs"
    assert leaf1["binds"] == ["configs/leaf1/config_db.json:/var/sonic/config_db.json:ro"]
    assert leaf1["exec"] == [sonic.wait_command()]
    assert "connectivity" not in docs[-1]["spec"]  # vxlan, the CRD's default


def test_every_bind_source_is_served_by_a_configmap_with_its_contents():
    topo, docs = manifests()
    maps = {cm["metadata"]["name"]: cm for cm in by_kind(docs, "ConfigMap")}
    files = docs[-1]["spec"]["deployment"]["filesFromConfigMap"]
    definition = yaml.safe_load(docs[-1]["spec"]["definition"]["containerlab"])
    binds = {(node, b.split(":")[0]) for node, spec in definition["topology"]["nodes"].items()
             for b in spec.get("binds", [])}
    assert binds and binds == {(node, f["filePath"]) for node, fs in files.items() for f in fs}
    for node, entries in files.items():
        for entry in entries:
            assert entry["mode"] == "read"
            data = maps[entry["configMapName"]]["data"]
            source = topo.path.parent / entry["filePath"]
            assert data[entry["configMapPath"]] == source.read_text()
    assert files["leaf1"][0]["filePath"] == "configs/leaf1/config_db.json"
    assert files["leaf1"][0]["configMapPath"] == "config_db.json"


def test_yaml_round_trips_and_reads_as_literal_blocks():
    _, docs = manifests()
    text = export.dump(docs)
    assert list(yaml.safe_load_all(text)) == docs
    assert "    containerlab: |" in text
    assert "  config_db.json: |" in text


def test_project_switch_nodes_export_as_the_switch_image(lab_copy):
    def edit(doc):
        doc["topology"]["nodes"]["leaf1"]["labels"] = {"rocelab.switch": "rocelab"}
    topo, docs = manifests(lab_copy(edit=edit))
    leaf1 = definition(docs)["topology"]["nodes"]["leaf1"]
    assert leaf1["kind"] == "linux"
    assert leaf1["image"] == "rocelab-switch:1.2.3"
    assert leaf1["env"] == {"ROCELAB_PORTS": ("eth1=Ethernet0,eth2=Ethernet4,eth3=Ethernet8,"
                                              "eth4=Ethernet12"),
                            "ROCELAB_TIME_SCALE": "3000",
                            "ROCELAB_MTUS": "eth1=9100,eth2=9100,eth3=9100,eth4=9100"}
    assert leaf1["binds"] == ["configs/leaf1/config_db.json:/etc/sonic/config_db.json:ro"]
    assert "exec" not in leaf1


def test_a_file_bound_twice_travels_once(lab_copy):
    def edit(doc):
        for host in ("h1", "h2"):
            doc["topology"]["nodes"][host]["binds"] = ["shared/hosts.txt:/etc/rocelab-hosts:ro"]
    path = lab_copy(edit=edit)
    (path.parent / "shared").mkdir()
    (path.parent / "shared/hosts.txt").write_text("10.1.1.11 h1\n")
    topo, docs = manifests(path)
    assert len(by_kind(docs, "ConfigMap")) == 5
    files = docs[-1]["spec"]["deployment"]["filesFromConfigMap"]
    assert files["h1"] == files["h2"] == [{
        "filePath": "shared/hosts.txt", "configMapName": f"{topo.name}-shared-hosts-txt",
        "configMapPath": "hosts.txt", "mode": "read"}]


def test_a_bound_folder_is_refused(lab_copy):
    def edit(doc):
        doc["topology"]["nodes"]["h1"]["binds"] = ["configs:/configs"]
    with pytest.raises(LabError, match="bind source configs: not a file"):
        manifests(lab_copy(edit=edit))


def test_kubernetes_names_are_dns_labels():
    assert export.dns_label("Roce_Lab.v2") == "roce-lab-v2"
    assert export.dns_label("__") == "lab"
    long_a, long_b = "a" * 70 + "-x", "a" * 70 + "-y"
    assert len(export.dns_label(long_a)) <= 63 and DNS_LABEL.match(export.dns_label(long_a))
    assert export.dns_label(long_a) != export.dns_label(long_b)
    assert export.config_map_key("configs/leaf 1/config_db.json") == "config_db.json"
    assert export.config_map_key("a/b c.txt") == "b-c.txt"


def test_lab_names_become_safe_resource_names(lab_copy):
    _, docs = manifests(lab_copy(name="Roce_Lab.2"))
    assert docs[-1]["metadata"]["name"] == "roce-lab-2"
    assert all(DNS_LABEL.match(d["metadata"]["name"]) for d in docs)
    definition = yaml.safe_load(docs[-1]["spec"]["definition"]["containerlab"])
    assert definition["name"] == "Roce_Lab.2"  # containerlab's own name is left alone


def test_export_writes_one_file_to_apply(tmp_path):
    done = export.export("roce-v2-leafspine", "clabernetes", tmp_path / "out")
    assert done.path == tmp_path / "out" / "roce-v2-leafspine.yaml"
    assert done.topology == "roce-v2-leafspine" and done.config_maps == 4
    assert done.largest_mtu == 9100 and done.connectivity == "vxlan"
    docs = list(yaml.safe_load_all(done.path.read_text()))
    assert [d["kind"] for d in docs][-1] == "Topology"
    with pytest.raises(LabError, match="unknown export format 'kne'"):
        export.export("roce-v2-leafspine", "kne", tmp_path)


def test_link_mtus_go_inside_the_nodes(lab_copy):
    def edit(doc):
        for link in doc["topology"]["links"]:
            if "h3:eth1" in link["endpoints"]:
                link["mtu"] = 4200
            if "leaf2:eth1" in link["endpoints"]:
                link["mtu"] = 1450
        for switch in ("leaf2", "spine1"):  # the project's switch: MTU from its entrypoint
            doc["topology"]["nodes"][switch]["labels"] = {"rocelab.switch": "rocelab"}
        doc["topology"]["nodes"]["h3"]["exec"] = []
    _, docs = manifests(lab_copy(edit=edit))
    nodes = definition(docs)["topology"]["nodes"]
    assert nodes["h3"]["exec"] == ["ip link set dev eth1 mtu 4200",
                                   "ethtool -K eth1 tx off tso off gso off gro off"]
    assert nodes["h1"]["exec"][0] == "ip link set dev eth1 mtu 9100"
    assert nodes["leaf2"]["env"]["ROCELAB_MTUS"] == "eth1=1450,eth2=9100,eth3=4200,eth4=9100"
    assert nodes["spine1"]["env"]["ROCELAB_MTUS"] == "eth1=9100,eth2=1450"


def test_sonic_port_mtu_must_agree_with_its_link(lab_copy):
    def edit(doc):
        for link in doc["topology"]["links"]:
            if "h2:eth1" in link["endpoints"]:
                link["mtu"] = 4200
    path = lab_copy(edit=edit)
    with pytest.raises(LabError) as e:
        manifests(path)
    config = path.parent.resolve() / "configs/leaf1/config_db.json"
    assert str(e.value) == (
        f"{path.resolve()}: topology.links[5].mtu: 4200, but {config}: PORT|Ethernet12: mtu "
        "9100: on clabernetes SONiC-VS takes leaf1:eth4's MTU from PORT alone (links lose "
        "mtu:); make them agree")


def test_groups_are_resolved_into_their_nodes(lab_copy):
    def edit(doc):
        doc["topology"]["groups"] = {"rack1": {
            "kind": "linux", "image": "rocelab-host:rack1", "labels": {"rack": "1", "tier": "h"},
            "env": {"RACK": "1"}, "binds": ["rack.txt:/etc/rack:ro"]}}
        for name in ("h1", "h2"):
            node = doc["topology"]["nodes"][name]
            node.pop("kind")
            node["group"] = "rack1"
        doc["topology"]["nodes"]["h2"]["labels"] = {"tier": "host2"}
    path = lab_copy(edit=edit)
    (path.parent / "rack.txt").write_text("rack 1\n")
    _, docs = manifests(path)
    doc = definition(docs)
    assert "groups" not in doc["topology"]  # clabernetes' per-node topologies have none
    h1, h2 = doc["topology"]["nodes"]["h1"], doc["topology"]["nodes"]["h2"]
    assert "group" not in h1 and h1["kind"] == "linux" and h1["image"] == "rocelab-host:rack1"
    assert h1["labels"] == {"rack": "1", "tier": "h"} and h1["env"] == {"RACK": "1"}
    assert h2["labels"] == {"rack": "1", "tier": "host2"}  # the node's own label wins
    assert h1["binds"] == ["rack.txt:/etc/rack:ro"]  # and travels in a ConfigMap
    files = docs[-1]["spec"]["deployment"]["filesFromConfigMap"]
    assert [f["filePath"] for f in files["h1"]] == ["rack.txt"]
    assert "group" not in doc["topology"]["nodes"]["h3"]


def test_slurpeeth_connectivity_is_offered(tmp_path):
    _, docs = manifests(connectivity="slurpeeth")
    assert docs[-1]["spec"]["connectivity"] == "slurpeeth"
    done = export.export("roce-v2-leafspine", "clabernetes", tmp_path, "slurpeeth")
    assert done.connectivity == "slurpeeth"
    with pytest.raises(LabError, match="unknown connectivity 'udp' \\(clabernetes has: vxlan, "
                                       "slurpeeth\\)"):
        export.clabernetes_manifests(topology.load("roce-v2-leafspine"), "1", "udp")
