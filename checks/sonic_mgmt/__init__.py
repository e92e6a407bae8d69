"""sonic-mgmt's QoS SAI tests run against the switch model: thresholds, harness and cases."""
