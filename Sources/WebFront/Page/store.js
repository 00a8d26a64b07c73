// The page's one shared state: the loaded rows, the filter, the feed, the held list, the status and the view.
// Modules read and write it here; none keeps a copy of what is in it.

export const S = {
  filter: '',
  filterBad: false,          // the API refused the filter: the list shows nothing
  highlight: '',
  newestFirst: true,
  // Stored rows, split so that both a live prepend and a page append are O(1):
  // head = rows from the live feed, oldest first (the newest is head[head.length-1]);
  // body = rows from /api/exchanges pages, newest first.
  head: [],
  body: [],
  ids: new Map(),          // id -> row, for every loaded row
  next: null,              // keyset cursor for the next page (null: at the end)
  started: false,          // first page answered at least once
  loading: false,
  loadingFirst: false,
  gen: 0,                  // bumped on every filter change; stale answers are dropped
  detailGen: 0,            // bumped whenever the detail pane shows something else; its late answers are dropped
  inflight: [],            // in-flight entries from ws "open" (newest first), minus stored ones
  seenReq: new Set(),      // request_ids of stored rows (so a late "open" does not resurrect them)
  sel: null,               // selected row key: 's<id>' or 'r<request_id>'
  hl: new Set(),           // ids matching the highlight filter
  hlGen: 0,
  hlNext: null,
  hlLast: null,
  hlBusy: false,
  held: [],
  status: null,
  rps: [],                 // requests_per_second of the last 60 ws status messages
  newCount: 0,
  ws: null,
  live: 'connecting',
  backoff: 500,
  reconnectAt: 0,
  everHello: false,
  maxId: 0,
  view: 'traffic',         // traffic | devices | settings | status
  lastDeepLink: null,      // '#/exchange/ID' or '#/device/NAME' last followed (the login replays it)
};

export const storedCount = () => S.head.length + S.body.length;

/** Stored row j in newest-first order. */
function storedAt(j) {
  const hl = S.head.length;
  return j < hl ? S.head[hl - 1 - j] : S.body[j - hl];
}

/** Rows in the list: in-flight entries and stored rows. */
export const count = () => S.inflight.length + storedCount();

/** The list's item i in the current sort order. */
export function itemAt(i) {
  const nIn = S.inflight.length;
  if (S.newestFirst) return i < nIn ? S.inflight[i] : storedAt(i - nIn);
  const n = storedCount();
  return i < n ? storedAt(n - 1 - i) : S.inflight[nIn - 1 - (i - n)];
}

const keyOf = item => (item._open ? 'r' + item.request_id : 's' + item.id);
export const keyAt = i => keyOf(itemAt(i));

/** Forget every stored row and the selection (the capture was cleared). */
export function dropRows() {
  S.head = []; S.body = []; S.ids = new Map(); S.sel = null;
}
