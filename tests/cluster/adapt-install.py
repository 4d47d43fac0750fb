#!/usr/bin/env python3
"""Adapts a controller's upstream install manifest to a controller that runs
as a local process beside the test control plane instead of in a Pod.

Reads the manifest as JSON objects on stdin (as `kubectl create
--dry-run=client -o json` prints them, one after another) and writes one
JSON List on stdout:
- Deployments are dropped: the controller binary runs on this machine.
- Services become ExternalName Services for localhost, which the apiserver's
  service resolver follows; so webhook calls reach 127.0.0.1.
- Webhook configurations and CRD conversion webhooks call the controller's
  webhook port (an ExternalName Service has no port mapping), and
  APIServices its aggregated API server's port.

Usage: adapt-install.py WEBHOOK_PORT [API_PORT] < upstream.json > adapted.json
"""

import json
import sys


def adapt_service(obj):
    ports = [
        {k: v for k, v in port.items() if k in ("name", "port", "protocol")}
        for port in obj["spec"].get("ports", [])
    ]
    obj["spec"] = {"type": "ExternalName", "externalName": "localhost", "ports": ports}


def point_at(client_config, port):
    service = client_config.get("service")
    if service is not None:
        service["port"] = port


def adapt(obj, port, api_port):
    kind = obj.get("kind")
    if kind == "Deployment":
        return None
    if kind == "Service":
        adapt_service(obj)
    elif kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for webhook in obj.get("webhooks", []):
            point_at(webhook["clientConfig"], port)
    elif kind == "CustomResourceDefinition":
        webhook = obj["spec"].get("conversion", {}).get("webhook")
        if webhook is not None:
            point_at(webhook["clientConfig"], port)
    elif kind == "APIService" and api_port is not None:
        point_at(obj["spec"], api_port)
    return obj


def read_objects(text):
    decoder = json.JSONDecoder()
    index = 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index == len(text):
            return
        obj, index = decoder.raw_decode(text, index)
        if obj.get("kind") == "List":
            yield from obj["items"]
        else:
            yield obj


def main():
    port = int(sys.argv[1])
    api_port = int(sys.argv[2]) if len(sys.argv) > 2 else None
    items = read_objects(sys.stdin.read())
    adapted = [obj for obj in (adapt(item, port, api_port) for item in items) if obj is not None]
    json.dump({"apiVersion": "v1", "kind": "List", "items": adapted}, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
