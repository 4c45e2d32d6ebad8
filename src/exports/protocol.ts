/** `agent-tools/protocol`: the wire between serving processes and the platform: every call, event and error as a Schema. */
export * as Protocol from "../protocol/Protocol.js"
