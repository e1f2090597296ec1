//! The OpenAPI 3.1 document of the HTTP API (`GET /api/v1/openapi.json`), built from the
//! same calls that register the routes: [`Route`] adds a handler to axum's method router and
//! its [`Op`] to the document in one call, so a route cannot be served undocumented or
//! documented under another path or method. Request and response bodies are described by
//! the JSON Schema (2020-12, OpenAPI 3.1's dialect) that schemars derives from the handlers'
//! own types, honouring their serde attributes (`flatten`, `skip_serializing_if`, tags), so
//! a field added to a response type is in the document without anyone writing it there.
//!
//! schemars rather than utoipa: it already derives the inventory's JSON Schema here, and it
//! describes what serde writes (its serialize contract), field attributes included.
//!
//! Owns the document's shape only; it never answers a request itself.

use axum::handler::Handler;
use axum::routing::MethodRouter;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{json, Map, Value};

use super::error::ErrorBody;

/// Where schemars puts named schemas: OpenAPI's components.
const DEFINITIONS_PATH: &str = "/components/schemas";

type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn subschema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// A body: JSON of a type's schema, or text of a media type.
#[derive(Debug, Clone, Copy)]
enum Body {
    Json(SchemaFn),
    Text(&'static str),
}

#[derive(Debug, Clone)]
struct Response {
    status: u16,
    description: &'static str,
    body: Option<Body>,
}

#[derive(Debug, Clone)]
struct Parameter {
    name: &'static str,
    location: &'static str,
    required: bool,
    schema: Value,
    description: &'static str,
}

/// The documentation of one operation (a method on a path).
#[derive(Debug, Clone)]
pub(super) struct Op {
    id: &'static str,
    summary: &'static str,
    parameters: Vec<Parameter>,
    request: Option<SchemaFn>,
    responses: Vec<Response>,
    mutating: bool,
}

impl Op {
    /// An operation named `id` (unique in the document) that `summary` describes.
    pub fn new(id: &'static str, summary: &'static str) -> Self {
        Op {
            id,
            summary,
            parameters: Vec::new(),
            request: None,
            responses: Vec::new(),
            mutating: false,
        }
    }

    /// A `{name}` segment of the path, of the JSON Schema `schema`.
    pub fn path(mut self, name: &'static str, schema: Value, description: &'static str) -> Self {
        self.parameters.push(Parameter {
            name,
            location: "path",
            required: true,
            schema,
            description,
        });
        self
    }

    /// An optional query parameter of the JSON Schema `schema`.
    pub fn query(mut self, name: &'static str, schema: Value, description: &'static str) -> Self {
        self.parameters.push(Parameter {
            name,
            location: "query",
            required: false,
            schema,
            description,
        });
        self
    }

    /// A query parameter the operation cannot do without.
    pub fn required_query(
        self,
        name: &'static str,
        schema: Value,
        description: &'static str,
    ) -> Self {
        let mut op = self.query(name, schema, description);
        if let Some(last) = op.parameters.last_mut() {
            last.required = true;
        }
        op
    }

    /// A required JSON request body of type `T` (how it is deserialized).
    pub fn body<T: JsonSchema>(mut self) -> Self {
        self.request = Some(subschema::<T>);
        self
    }

    /// A JSON response of type `T` (how it is serialized).
    pub fn json<T: JsonSchema>(mut self, status: u16, description: &'static str) -> Self {
        self.responses.push(Response {
            status,
            description,
            body: Some(Body::Json(subschema::<T>)),
        });
        self
    }

    /// A response whose body is text of `media_type`.
    pub fn text(
        mut self,
        status: u16,
        media_type: &'static str,
        description: &'static str,
    ) -> Self {
        self.responses.push(Response {
            status,
            description,
            body: Some(Body::Text(media_type)),
        });
        self
    }

    /// An error response (the JSON error body).
    pub fn error(mut self, status: u16, description: &'static str) -> Self {
        self.responses.push(Response {
            status,
            description,
            body: Some(Body::Json(subschema::<ErrorBody>)),
        });
        self
    }

    /// A mutating route: needs the admin bearer token (401 without it or with a wrong one, 403
    /// when none is configured), takes no body over the limit (413), and is refused while
    /// the replica shuts down (503).
    pub fn mutating(self) -> Self {
        let mut op = self
            .error(401, "missing or wrong bearer token")
            .error(
                403,
                "no admin token is configured: mutating routes are disabled",
            )
            .error(413, "request body over the limit")
            .error(
                503,
                "the replica is shutting down, or the job store does not answer",
            );
        op.mutating = true;
        op
    }

    fn render(
        &self,
        responses_for: &mut SchemaGenerator,
        requests_for: &mut SchemaGenerator,
    ) -> Value {
        let mut op = json!({
            "operationId": self.id,
            "summary": self.summary,
            "parameters": self.parameters.iter().map(|p| json!({
                "name": p.name,
                "in": p.location,
                "required": p.required,
                "description": p.description,
                "schema": p.schema,
            })).collect::<Vec<_>>(),
        });
        if let Some(request) = self.request {
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": request(requests_for) } },
            });
        }
        let mut responses = Map::new();
        for response in &self.responses {
            let mut rendered = json!({ "description": response.description });
            match response.body {
                Some(Body::Json(schema)) => {
                    rendered["content"] =
                        json!({ "application/json": { "schema": schema(responses_for) } });
                }
                Some(Body::Text(media_type)) => {
                    let mut content = Map::new();
                    content.insert(media_type.into(), json!({ "schema": { "type": "string" } }));
                    rendered["content"] = Value::Object(content);
                }
                None => {}
            }
            responses.insert(response.status.to_string(), rendered);
        }
        // whatever else an operation can answer (a malformed request, a store that does not
        // answer) is the JSON error body
        responses.insert(
            "default".into(),
            json!({
                "description": "an error: `{\"error\", \"status\"}`",
                "content": { "application/json": { "schema": subschema::<ErrorBody>(responses_for) } },
            }),
        );
        op["responses"] = Value::Object(responses);
        if self.mutating {
            op["security"] = json!([{ "bearer": [] }]);
        }
        op
    }
}

/// One path's handlers and their documentation, added together.
#[derive(Debug)]
pub(super) struct Route<S> {
    methods: MethodRouter<S>,
    ops: Vec<(&'static str, Op)>,
}

impl<S: Clone + Send + Sync + 'static> Route<S> {
    pub fn new() -> Self {
        Route {
            methods: MethodRouter::new(),
            ops: Vec::new(),
        }
    }

    pub fn get<H: Handler<T, S>, T: 'static>(mut self, handler: H, op: Op) -> Self {
        self.methods = self.methods.get(handler);
        self.ops.push(("get", op));
        self
    }

    pub fn post<H: Handler<T, S>, T: 'static>(mut self, handler: H, op: Op) -> Self {
        self.methods = self.methods.post(handler);
        self.ops.push(("post", op));
        self
    }

    pub fn delete<H: Handler<T, S>, T: 'static>(mut self, handler: H, op: Op) -> Self {
        self.methods = self.methods.delete(handler);
        self.ops.push(("delete", op));
        self
    }
}

/// The routes of a router and their documentation, gathered as they are registered.
#[derive(Debug)]
pub(super) struct Documented<S> {
    router: axum::Router<S>,
    paths: Vec<(&'static str, Vec<(&'static str, Op)>)>,
}

impl<S: Clone + Send + Sync + 'static> Documented<S> {
    pub fn new() -> Self {
        Documented {
            router: axum::Router::new(),
            paths: Vec::new(),
        }
    }

    pub fn route(mut self, path: &'static str, route: Route<S>) -> Self {
        self.router = self.router.route(path, route.methods);
        self.paths.push((path, route.ops));
        self
    }

    /// The router, and the OpenAPI document of everything routed so far plus `extra` (the
    /// route that serves the document itself).
    pub fn finish(self, extra: (&'static str, Op)) -> (axum::Router<S>, Value) {
        let mut paths = self.paths;
        paths.push((extra.0, vec![("get", extra.1)]));
        (self.router, document(&paths))
    }
}

fn generator(serialize: bool) -> SchemaGenerator {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = DEFINITIONS_PATH.into();
        s.meta_schema = None;
        // request bodies are few and small: inline, so their (deserialize) schemas never
        // share a name with a response's (serialize) one
        s.inline_subschemas = !serialize;
    });
    if serialize {
        settings.for_serialize().into_generator()
    } else {
        settings.for_deserialize().into_generator()
    }
}

fn document(paths: &[(&'static str, Vec<(&'static str, Op)>)]) -> Value {
    let mut responses_for = generator(true);
    let mut requests_for = generator(false);
    let mut rendered = Map::new();
    for (path, ops) in paths {
        let mut item = Map::new();
        for (method, op) in ops {
            item.insert(
                (*method).into(),
                op.render(&mut responses_for, &mut requests_for),
            );
        }
        rendered.insert((*path).into(), Value::Object(item));
    }
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "tablekeeper",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The HTTP API of a tablekeeper replica: metrics, health, tables, jobs, \
                pins and the dashboard (README \"HTTP API\").",
            "license": { "name": "Apache-2.0", "identifier": "Apache-2.0" },
        },
        "paths": rendered,
        "components": {
            "schemas": responses_for.take_definitions(true),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the admin token, from the variable named by `admin_token_env`",
                },
            },
        },
    })
}
