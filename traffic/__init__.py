"""Traffic for the lab: RoCE, PFC and ECN packets, crafted with scapy and parsed fast."""
