import BusymateShared
import NIOHTTP1

extension Rule.HeaderEdits {
    /// Remove, then set (replace or add), then add; names in any case.
    func apply(to headers: inout HTTPHeaders) {
        for name in remove { headers.remove(name: name) }
        for (name, value) in set { headers.replaceOrAdd(name: name, value: value) }
        for (name, value) in add { headers.add(name: name, value: value) }
    }
}
