# Multi-stage build of the asynqdeck binary.
# Not buildable on the development machines (no Docker engine); kept minimal.
FROM rust:1-bookworm AS build
WORKDIR /src
# Cargo wants every declared target (tests/, bench/) present; .dockerignore
# keeps build output and the Go peer's downloads out.
COPY . .
RUN cargo build --release --locked --bin asynqdeck

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home asynqdeck
COPY --from=build /src/target/release/asynqdeck /usr/local/bin/asynqdeck
USER asynqdeck
# Inside a container the dashboard must listen on every interface: PORT
# (asynqmon's variable) does that, and `-e PORT=3000` still overrides it.
ENV PORT=8080
EXPOSE 8080
ENTRYPOINT ["asynqdeck", "serve"]
