import SinkiSupport

/// How a store draws change tags (issue 24, its "Also"): a tag is the time of the save in nanoseconds
/// since the epoch, or one above the last tag the store drew when that is later. Tags were a counter
/// for the whole store, so the gap between two of a user's tags counted every other user's saves in
/// between; a time says only when, which the user knows. Tags still only grow, are unique in the store
/// (the counter behind them is the store's: `last_tag`, the `change_tags` sequence), and a database of
/// counter tags goes on from them: the next tag is simply far above.
enum ChangeTags {
    /// The tag after `last`, drawn at `clock` (nanoseconds since the epoch).
    static func next(after last: Int64, at clock: Int64 = Clock.now()) -> Int64 { max(last &+ 1, clock) }
}
