// Command etcd runs the etcd server from the pinned go.etcd.io/etcd/server module, so the testbed
// gets an etcd >= 3.5 without a system package (Debian ships 3.4, too old for Kubernetes 1.36).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
