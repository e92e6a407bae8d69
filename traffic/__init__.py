"""Traffic for a lab: flow patterns (incast, all-to-all, ring all-reduce), probes, RoCE,
PFC and ECN frames crafted with scapy, and the baselines RoCE is compared with (TCP,
Soft-RoCE). Reading frames fast is the NIC's (``nic.roce``)."""
