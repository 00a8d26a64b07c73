"""A mitmdump addon for `mitmdump -nr FLOWS -s select_flows.py`: each flow
read from the file is tested against every filter in $PEERS_FILTERS (a JSON
list) with mitmproxy's own parser, as `mitmdump -nr FLOWS FILTER` does
(readfile_filter), in one start instead of one per filter. Writes
{filter: [url, ...]} to $PEERS_SELECTED when done; a filter mitmproxy
refuses maps to {"error": why}."""
import json
import os

from mitmproxy import flowfilter


class Select:
    def __init__(self):
        self.filters = json.loads(os.environ["PEERS_FILTERS"])
        self.compiled, self.selected = {}, {}
        for expression in self.filters:
            try:
                self.compiled[expression] = flowfilter.parse(expression)
                self.selected[expression] = []
            except ValueError as e:
                self.selected[expression] = {"error": str(e)}
        self.seen = set()

    def request(self, flow):
        # Read from the file, the flow is whole (its response, its error) at every hook.
        if flow.id in self.seen:
            return
        self.seen.add(flow.id)
        for expression, matcher in self.compiled.items():
            if matcher(flow):
                self.selected[expression].append(flow.request.pretty_url)

    def done(self):
        with open(os.environ["PEERS_SELECTED"], "w") as f:
            json.dump(self.selected, f)


addons = [Select()]
