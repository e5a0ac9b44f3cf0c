"""The recorder: watches Kueue Workloads, Jobs, Pods and Nodes and writes allocation records to the ledger."""
