"""Tables and claims of the issue-10 variant study (placeholder; filled in below)."""


def report(out, cfg):
    print("report: not yet written")
