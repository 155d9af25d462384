"""Compiles the project's .proto files with the system protoc.

placer_proto_library(name, srcs, deps, grpc) runs /usr/bin/protoc (and
grpc_cpp_plugin when grpc = True) over srcs and wraps the generated C++ in a
cc_library called `name`. Imports are resolved from the workspace root, so a
file imports another as "profiles/cluster.proto"; deps are other
placer_proto_library targets whose .proto files are imported.
"""

def placer_proto_library(name, srcs, deps = [], grpc = False, visibility = None):
    bases = [s[:-len(".proto")] for s in srcs]
    pkg = native.package_name()
    outs = []
    for b in bases:
        outs += [b + ".pb.h", b + ".pb.cc"]
        if grpc:
            outs += [b + ".grpc.pb.h", b + ".grpc.pb.cc"]
    dep_protos = [d + "_protos" for d in deps]
    native.filegroup(
        name = name + "_protos",
        srcs = srcs + dep_protos,
        visibility = visibility,
    )
    plugin = ""
    if grpc:
        plugin = " --grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin"
    native.genrule(
        name = name + "_gen",
        srcs = [name + "_protos"],
        outs = outs,
        cmd = "/usr/bin/protoc -I. --cpp_out=$(GENDIR)" + plugin + " " +
              " ".join([(pkg + "/" + s) if pkg else s for s in srcs]),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party:protobuf"] + (["//third_party:grpc"] if grpc else []),
        visibility = visibility,
    )
