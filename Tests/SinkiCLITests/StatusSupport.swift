import SinkiRecord
import SinkiTestSupport
import Testing

/// `sinkid status --json` of agent `agent` in `cluster`, read from its state folder, and checked
/// against docs/status.schema.json on the way.
func statusJSON(_ cluster: Cluster, _ agent: String) throws -> JSONValue {
    let run = try sinkid(["status", "--json", "--state", cluster.directory.child(agent) + "/state"], in: cluster.directory)
    let json = try run.json()
    #expect(ControlTests.schema.problems(json) == [], "status --json breaks docs/status.schema.json")
    return json
}
