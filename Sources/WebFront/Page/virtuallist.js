// A fixed-row-height virtual list: only the visible rows (plus a small overscan) exist
// in the DOM; row elements are recycled by item key, so a prepend only moves rows
// (no re-fill) and scrolling re-fills only the rows that came into view.

export class VirtualList {
  /**
   * @param scrollEl  the scrolling element
   * @param bodyEl    the positioned element rows live in (its height is set to count*rowHeight)
   * @param opts      {rowHeight, count(): n, keyAt(i): string, create(): el, fill(el, i, key), decorate(el, i, key), onRange(first, last)}
   */
  constructor(scrollEl, bodyEl, opts) {
    this.scrollEl = scrollEl;
    this.bodyEl = bodyEl;
    this.o = opts;
    this.rowHeight = opts.rowHeight;
    this.overscan = opts.overscan || 8;
    this.shown = new Map();    // key -> element
    this.spare = [];
    this.first = 0;
    this.last = -1;
    this.fillVersion = 0;      // bump to force a re-fill of every shown row
    this.pending = false;
    scrollEl.addEventListener('scroll', () => this.schedule(), { passive: true });
    new ResizeObserver(() => this.schedule()).observe(scrollEl);
  }

  /** Offset of the list body from the scroll element's content top (a sticky header sits above it). */
  get bodyTop() { return this.bodyEl.offsetTop; }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.render(); });
  }

  /** Drop every row element (after the data was replaced wholesale). */
  reset() {
    for (const el of this.shown.values()) { el.remove(); el._key = null; el._item = null; this.spare.push(el); }
    this.shown.clear();
    this.render();
  }

  /** Re-render now; refill=true re-fills every row (data of shown keys changed). */
  refresh(refill) {
    if (refill) this.fillVersion++;
    this.render();
  }

  visibleRange() {
    const rh = this.rowHeight;
    const top = Math.max(0, this.scrollEl.scrollTop - this.bodyTop);
    const height = this.scrollEl.clientHeight;
    const count = this.o.count();
    const first = Math.min(count, Math.floor(top / rh));
    const last = Math.min(count - 1, Math.ceil((top + height) / rh));
    return [first, last];
  }

  render() {
    const o = this.o;
    const rh = this.rowHeight;
    const count = o.count();
    const h = count * rh;
    if (this._h !== h) { this.bodyEl.style.height = h + 'px'; this._h = h; }
    const [vf, vl] = this.visibleRange();
    const first = Math.max(0, vf - this.overscan);
    const last = Math.min(count - 1, vl + this.overscan);
    const want = new Map();
    for (let i = first; i <= last; i++) want.set(o.keyAt(i), i);
    // Free the rows that left the window.
    for (const [key, el] of this.shown) {
      if (!want.has(key)) {
        // Detached, so that queries for .row only ever see the rows on screen.
        this.shown.delete(key);
        el._key = null;
        el._item = null;
        el.remove();
        this.spare.push(el);
      }
    }
    for (const [key, i] of want) {
      let el = this.shown.get(key);
      if (!el) {
        el = this.spare.pop() || o.create();
        this.bodyEl.appendChild(el);
        el._key = key;
        el._fill = -1;
        this.shown.set(key, el);
      }
      if (el._i !== i) {
        el.style.transform = 'translateY(' + (i * rh) + 'px)';
        el._i = i;
      }
      if (el._fill !== this.fillVersion || el._item !== o.itemAt(i)) {
        o.fill(el, i, key);
        el._fill = this.fillVersion;
        el._item = o.itemAt(i);
      }
      o.decorate(el, i, key);
    }
    // Keep the pool from growing without bound after a big resize.
    if (this.spare.length > 60) this.spare.length = 60;
    this.first = vf;
    this.last = vl;
    if (o.onRange) o.onRange(vf, vl, count);
  }

  /** Make index i visible (minimal scroll). */
  scrollToIndex(i, align) {
    const rh = this.rowHeight;
    const top = this.bodyTop + i * rh;
    const el = this.scrollEl;
    const viewTop = el.scrollTop + this.bodyTop;   // the sticky header covers bodyTop pixels
    const viewBottom = el.scrollTop + el.clientHeight;
    if (align === 'center') el.scrollTop = top - el.clientHeight / 2;
    else if (top < viewTop) el.scrollTop = top - this.bodyTop;
    else if (top + rh > viewBottom) el.scrollTop = top + rh - el.clientHeight;
    this.render();
  }

  /** Shift the scroll position by n rows (to keep rows still while items are added above them). */
  shiftBy(nRows) {
    if (!nRows) return;
    this.bodyEl.style.height = (this.o.count() * this.rowHeight) + 'px';
    this._h = this.o.count() * this.rowHeight;
    this.scrollEl.scrollTop += nRows * this.rowHeight;
  }

  elementAt(i) {
    for (const el of this.shown.values()) if (el._i === i) return el;
    return null;
  }

  rowsPerPage() { return Math.max(1, Math.floor((this.scrollEl.clientHeight - this.bodyTop) / this.rowHeight) - 1); }
}
