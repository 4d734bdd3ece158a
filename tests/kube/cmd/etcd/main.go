// etcd exactly as upstream's go.etcd.io/etcd/v3 main package builds it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
