// Command etcd is upstream etcd's server, built from its module at the
// version pinned in go.mod. Upstream's main package lives in the root
// module go.etcd.io/etcd/v3, whose go.mod has replace directives, so it
// cannot be built as a dependency; etcdmain is the same entry point.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
