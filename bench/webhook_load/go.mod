module gpufleet.local/bench/webhook_load

go 1.22
