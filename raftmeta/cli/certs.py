"""``raftmeta certs make``: a throwaway CA and certificates for trying mutual TLS locally."""

from __future__ import annotations

from pathlib import Path

import click

from raftmeta.cli.common import emit_json, int_range, output_option, usage_error

# A certificate's validity: up to 100 years (datetime, and so the certificate's notAfter, ends in 9999).
DAYS_MAX = 36_500


@click.group()
def certs() -> None:
    """Certificates for TLS (docs/security.md)."""


@certs.command("make")
@click.option("--nodes", type=int_range(1, 99), default=3, show_default=True,
              help="Node certificates to make, for node ids 1..N (CN node-N).")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Directory to write ca.crt/.key, node-N.crt/.key and client.crt/.key into.")  # fmt: skip
@click.option("--host", "hosts", multiple=True,
              help="Extra DNS name or IP address for the node certificates (besides localhost and "
              "127.0.0.1); repeatable.")  # fmt: skip
@click.option("--days", type=int_range(1, DAYS_MAX), default=90, show_default=True, help="Validity in days.")
@click.option("--force", is_flag=True, help="Replace certificates already in --out (including the CA).")
@output_option
def make(nodes: int, out: Path, hosts: tuple[str, ...], days: int, force: bool, output: str) -> None:
    """Make a CA and node and client certificates (EC P-256; keys readable by the owner only).

    For trying TLS, not for production: use your own CA there, with the same names
    (docs/security.md).
    """
    from raftmeta.local.certs import existing_files, make_certs

    node_ids = list(range(1, nodes + 1))
    found = existing_files(out, node_ids)
    if found and not force:
        raise usage_error(
            f"{len(found)} certificate files are already there (e.g. {found[0]}); --force replaces them", "--out"
        )
    try:
        made = make_certs(out, node_ids, hosts=hosts, days=days, overwrite=True)
    except ValueError as exc:
        raise usage_error(str(exc), "--host") from exc
    if output == "json":
        emit_json(made.to_json())
        return
    click.echo(f"CA:     {made.ca.cert} (key {made.ca.key})")
    for node_id, files in sorted(made.nodes.items()):
        click.echo(f"node {node_id}: {files.cert} (key {files.key})")
    click.echo(f"client: {made.client.cert} (key {made.client.key})")
    click.echo(f"valid for {days} days; node names: {', '.join(['localhost', '127.0.0.1', *hosts])}")
