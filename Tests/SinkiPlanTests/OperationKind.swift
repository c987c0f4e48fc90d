import SinkiPlan

/// Operations by kind, for the randomized test's count of what it exercised.
enum OperationKind: Int, CaseIterable {
    case advanceSynced, upload, uploadMove, makeRemoteFolder, sendDelete, download, makeLocalFolder
    case deleteLocal, renameLocal, keepLocalAside, keepRemoteAside, overwriteLocal, overwriteRemote, resolve

    init?(_ operation: Operation) {
        switch operation {
        case .nothing, .wait: return nil
        case .advanceSynced: self = .advanceSynced
        case let .upload(upload): self = upload.movedFrom == nil ? .upload : .uploadMove
        case .makeRemoteFolder: self = .makeRemoteFolder
        case .sendDelete: self = .sendDelete
        case .download: self = .download
        case .makeLocalFolder: self = .makeLocalFolder
        case .deleteLocal: self = .deleteLocal
        case .renameLocal: self = .renameLocal
        case .conflict(.keepLocalAside): self = .keepLocalAside
        case .conflict(.keepRemoteAside): self = .keepRemoteAside
        case .conflict(.overwriteLocal): self = .overwriteLocal
        case .conflict(.overwriteRemote): self = .overwriteRemote
        case .conflict(.resolve): self = .resolve
        }
    }
}
