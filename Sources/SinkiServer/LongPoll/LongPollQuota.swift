import Synchronization

/// Long-polls open at once (parked, or being answered), per token and per user: the tokens a user
/// mints share the user's cap, so minting more does not hold more of the server's connections.
final class LongPollQuota: Sendable {
    let perToken: Int
    let perUser: Int
    private let counts = Mutex<(tokens: [String: Int], users: [String: Int])>(([:], [:]))

    init(perToken: Int, perUser: Int) {
        self.perToken = perToken
        self.perUser = perUser
    }

    /// Which cap a long-poll of `token` (of `user`) would pass.
    enum Refusal: Equatable { case token, user }

    /// Counts one more long-poll, or says which cap it would pass (nothing counted then).
    func admit(token: String, user: String) -> Refusal? {
        counts.withLock { counts in
            if counts.tokens[token, default: 0] >= perToken { return .token }
            if counts.users[user, default: 0] >= perUser { return .user }
            counts.tokens[token, default: 0] += 1
            counts.users[user, default: 0] += 1
            return nil
        }
    }

    /// An admitted long-poll ended.
    func release(token: String, user: String) {
        counts.withLock { counts in
            counts.tokens[token, default: 1] -= 1
            if counts.tokens[token] == 0 { counts.tokens.removeValue(forKey: token) }
            counts.users[user, default: 1] -= 1
            if counts.users[user] == 0 { counts.users.removeValue(forKey: user) }
        }
    }
}
